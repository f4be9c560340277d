"""Hub ids (lm/hub.py): a fake local hub cache loads offline; offline, gated and missing ids are
one line each. No test touches the network: the hub calls are either offline or monkeypatched."""

import pytest

from dynrag.errors import ConfigError, DynragError
from dynrag.lm import hub
from dynrag.lm.loader import check_model_spec, load_lm
from tests.tiny_models import tiny_llama, tiny_tokenizer

SNAPSHOT = "0123456789abcdef0123456789abcdef01234567"


def fake_hub(root, repo_id="org/tiny"):
    """A directory laid out like the hub cache, holding a tiny random model."""
    repo = root / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / SNAPSHOT
    tok = tiny_tokenizer()
    tiny_llama(len(tok)).save_pretrained(snapshot)
    tok.save_pretrained(snapshot)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(SNAPSHOT)
    return snapshot


@pytest.fixture
def offline_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path


def test_a_cached_hub_model_loads_offline(offline_cache):
    fake_hub(offline_cache)
    assert check_model_spec("hf:org/tiny") == "hf:org/tiny"
    lm = load_lm("hf:org/tiny?dtype=bfloat16")
    assert lm.name == "hf:org/tiny" and len(lm.generate("the river", max_new_tokens=3).token_ids) == 3


def test_hf_home_names_the_cache_too(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    fake_hub(tmp_path / "hub")
    assert hub.cached_file("org/tiny", "config.json").name == "config.json"


def test_offline_and_uncached_is_one_line_naming_the_model(offline_cache):
    with pytest.raises(ConfigError) as err:
        check_model_spec("hf:meta-llama/Llama-2-13b-chat-hf")
    line = str(err.value)
    assert "\n" not in line and "'hf:meta-llama/Llama-2-13b-chat-hf'" in line and "HF_HUB_OFFLINE=1" in line


def test_online_an_uncached_id_passes_the_check(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert check_model_spec("hf:org/elsewhere") == "hf:org/elsewhere"  # it downloads on load


def _raising(exc_type):
    def call(*args, **kwargs):
        exc = exc_type.__new__(exc_type)
        Exception.__init__(exc, "401 Client Error")
        raise exc
    return call


@pytest.mark.parametrize("error, expected", [
    ("GatedRepoError", "gated on the Hugging Face Hub; accept its licence at "
                       "https://huggingface.co/meta-llama/Llama-2-13b-chat-hf and set HF_TOKEN"),
    ("RepositoryNotFoundError", "no model meta-llama/Llama-2-13b-chat-hf on the Hugging Face Hub"),
    ("RevisionNotFoundError", "no such revision"),
])
def test_hub_errors_are_one_line(tmp_path, monkeypatch, error, expected):
    import huggingface_hub
    from huggingface_hub import errors

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", _raising(getattr(errors, error)))
    with pytest.raises(DynragError) as err:
        load_lm("hf:meta-llama/Llama-2-13b-chat-hf")
    line = str(err.value)
    assert "\n" not in line and line.startswith("model spec 'hf:meta-llama/Llama-2-13b-chat-hf': ")
    assert expected in line
