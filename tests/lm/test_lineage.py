"""A trained checkpoint names its parent in deeprag.json; the base model follows that back."""

import json

from dynrag.lm.lineage import CHECKPOINT_META, base_model, checkpoint_meta


def checkpoint(directory, parent):
    directory.mkdir()
    (directory / CHECKPOINT_META).write_text(json.dumps({"base_model": parent}), encoding="utf-8")
    return f"hf:{directory}"


def test_the_base_model_is_followed_back_through_both_stages(tmp_path):
    stage_one = checkpoint(tmp_path / "imi", "bundled:smollm2")
    stage_two = checkpoint(tmp_path / "cal", stage_one)
    assert checkpoint_meta(stage_two) == {"base_model": stage_one}
    assert base_model(stage_two) == base_model(stage_one) == "bundled:smollm2"


def test_any_other_model_is_its_own_base(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    assert checkpoint_meta(f"hf:{plain}") is None and checkpoint_meta("bundled") is None
    assert checkpoint_meta("not a spec at all") is None
    assert base_model(f"hf:{plain}") == f"hf:{plain.resolve()}"
    assert base_model("bundled:smollm2?device=cpu") == "bundled:smollm2"


def test_a_loop_of_parents_ends(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    checkpoint(a, f"hf:{b}")
    checkpoint(b, f"hf:{a}")
    assert base_model(f"hf:{a}") in (f"hf:{a.resolve()}", f"hf:{b.resolve()}")
