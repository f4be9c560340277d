"""The probe on the bundled model (slow: loads the 135M model): a capital it names in every
phrasing is known."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from dynrag.world.bank import BY_ID
from dynrag.world.probe import probe_world


@pytest.mark.slow
def test_the_bundled_model_knows_the_capital_of_france(tmp_path: Path):
    from dynrag.lm.loader import load_lm

    lm = load_lm("bundled:smollm2", progress=False)
    record = probe_world(lm, "bundled:smollm2", [BY_ID["real:capital:France"]], tmp_path, Console(quiet=True), progress=False)
    assert record["facts"]["real:capital:France"]["verdict"] == "known"
