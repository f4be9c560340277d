"""The demo's pieces that need no model (the demo itself runs in tests/cli/test_demo_ask.py, slow)."""

import importlib.util

from dynrag import demo
from dynrag.data import load_demo_questions
from dynrag.lm.bundled import DEFAULT_BUNDLED, converted_dir, resolve_bundled
from dynrag.methods.registry import METHODS


def test_quick_demo_questions_and_options_exist():
    ids = {q.id for q in load_demo_questions()}
    assert set(demo.QUICK_QUESTIONS) <= ids and len(demo.QUICK_QUESTIONS) == 3
    assert set(demo.QUICK_OPTIONS) == {"direct", "single", "dragin"}
    for name, options in demo.QUICK_OPTIONS.items():
        METHODS.parse_options(name, options)  # valid option names and values


def test_first_use_is_a_bundled_model_not_yet_dequantised(tmp_path, monkeypatch):
    monkeypatch.setenv("DYNRAG_CACHE_DIR", str(tmp_path))
    assert demo.first_use("bundled") and demo.first_use("bundled?kv_reuse=off")
    out = converted_dir(resolve_bundled(DEFAULT_BUNDLED))
    out.mkdir(parents=True)
    (out / "model.safetensors").write_bytes(b"")
    assert not demo.first_use(f"bundled:{DEFAULT_BUNDLED}")
    assert not demo.first_use("hf:/some/model")


def test_next_steps_name_the_commands_that_exist():
    line = demo.next_steps().plain
    assert "dynrag eval" in line and "dynrag demo --full" in line and "dynrag ask" in line and "\n" not in line
    assert ("dynrag serve" in line) == (importlib.util.find_spec("dynrag.serve") is not None)
