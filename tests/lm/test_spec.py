"""ModelSpec: every spec form parsed once, round-tripped, resolved; errors name the spec and the forms;
and no module but lm/spec.py reads a spec's text by its prefixes."""

import re
from pathlib import Path

import pytest

from dynrag.errors import ConfigError
from dynrag.lm.bundled import DEFAULT_BUNDLED
from dynrag.lm.spec import ModelSpec

SRC = Path(__file__).resolve().parents[2] / "src" / "dynrag"


@pytest.mark.parametrize("text, kind, target, file", [
    ("bundled", "bundled", "", ""),
    (f"bundled:{DEFAULT_BUNDLED}", "bundled", DEFAULT_BUNDLED, ""),
    ("hf:/models/x", "hf", "/models/x", ""),
    ("hf:org/name", "hf", "org/name", ""),
    ("hf:/models/x#m.gguf", "hf", "/models/x", "m.gguf"),
    ("openai:http://127.0.0.1:8080/v1#smollm2", "openai", "http://127.0.0.1:8080/v1", "smollm2"),
])
def test_every_form_parses_and_round_trips(text, kind, target, file):
    spec = ModelSpec.parse(f"  {text} ")
    assert (spec.kind, spec.target, spec.file) == (kind, target, file)
    assert str(spec) == text and ModelSpec.parse(str(spec)) == spec
    assert spec.is_http == (kind == "openai") and spec.is_local == (kind != "openai")


def test_model_options_are_typed_and_kept_in_the_text():
    spec = ModelSpec.parse("hf:/m#w.gguf?kv_reuse=prefix&kv_slots=2")
    assert spec.options.kv_reuse == "prefix" and spec.options.kv_slots == 2
    assert spec.base == "hf:/m#w.gguf" and str(spec) == "hf:/m#w.gguf?kv_reuse=prefix&kv_slots=2"
    assert ModelSpec.parse("bundled").options.kv_reuse == "recent"


def test_a_server_url_may_hold_a_query():
    spec = ModelSpec.parse("openai:http://h/v1?x=1#m")
    assert spec.kind == "openai" and spec.target == "http://h/v1?x=1" and spec.file == "m"


def test_resolved_names_the_default_bundled_model_and_leaves_the_rest():
    assert str(ModelSpec.parse("bundled?lookup=0").resolved()) == f"bundled:{DEFAULT_BUNDLED}?lookup=0"
    hf = ModelSpec.parse("hf:/x")
    assert hf.resolved() is hf


@pytest.mark.parametrize("text, message", [
    ("gpt-9", "unknown model spec 'gpt-9'; valid forms: bundled"),
    ("hf:", "model spec 'hf:' names no path or id; valid forms:"),
    ("hf:#w.gguf", "names no path or id"),
    ("bundled?reuse=off", "model spec 'bundled?reuse=off': unknown option 'reuse'"),
    ("bundled?kv_reuse", "expected KEY=VALUE"),
])
def test_errors_name_the_spec_and_the_valid_forms(text, message):
    with pytest.raises(ConfigError) as err:
        ModelSpec.parse(text)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_spec_is_picklable():
    import pickle

    spec = ModelSpec.parse("bundled?kv_reuse=off")
    assert pickle.loads(pickle.dumps(spec)) == spec


PREFIX_CHECK = re.compile(
    r"""startswith\(\(?\s*["'](openai:|hf:|bundled)|["']bundled["']\s*[!=]=|(?<!\.kind )[!=]=\s*["']bundled["']"""
    r"""|\[3:\]|partition\(["']\?["']\)"""
)


def test_only_the_spec_module_reads_spec_text():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "lm" / "spec.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if PREFIX_CHECK.search(line):
                found.append(f"{path.relative_to(SRC)}:{number}: {line.strip()}")
    assert not found, "parse model specs with dynrag.lm.spec.ModelSpec:\n" + "\n".join(found)


def test_with_options_sets_model_options_and_keeps_the_others():
    spec = ModelSpec.parse("hf:org/name?kv_reuse=off&dtype=float32").with_options(dtype="bfloat16", device="cpu")
    assert str(spec) == "hf:org/name?kv_reuse=off&dtype=bfloat16&device=cpu"
    assert spec.options.dtype == "bfloat16" and spec.options.kv_reuse == "off"


def test_every_backend_declares_what_it_can_give_before_loading():
    from typing import get_args

    from dynrag.lm.base import BACKEND_CAPABILITIES
    from dynrag.lm.spec import ModelOptions

    assert set(BACKEND_CAPABILITIES) == set(get_args(ModelOptions.model_fields["backend"].annotation))
    assert ModelSpec.parse("bundled").most_capabilities.hidden_states
    on_llama = ModelSpec.parse("hf:d#m.gguf?backend=llama.cpp").most_capabilities
    assert on_llama.attention and on_llama.logprobs and on_llama.hidden_states
    assert not on_llama.text_logprobs  # what llama.cpp cannot give: log p of a given text
    assert ModelSpec.parse("openai:http://127.0.0.1:9/v1#m").most_capabilities is None  # the server's to say
