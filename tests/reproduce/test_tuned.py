"""`reproduce --tuned DIR`: the rows of the tune's method run at its best values, and the table says so."""

from __future__ import annotations

import pytest

from dynrag.errors import ConfigError
from dynrag.reproduce.render import render
from dynrag.reproduce.runs import reproduce
from dynrag.tune.run import TuneSettings, run_tune
from tests.eval import fixtures as fx
from tests.fakes import method_factory as factory
from tests.reproduce.test_runs import answers, request
from tests.tune.doubles import PeakedFake


def tune_dir(tmp_path, variant: str | None):
    data = fx.write_json(tmp_path / "dev.json", fx.HOTPOT)
    fixed = {"variant": variant} if variant else {}
    settings = TuneSettings(run={"dataset": "hotpotqa", "data": str(data), "method": "dragin", "corpus": "contexts",
                                 "options": fixed}, space=["theta=0.9,1.4"], trials=2, sampler="grid")
    golds = tuple((q["question"], q["answer"]) for q in fx.HOTPOT)
    out = tmp_path / f"tune-{variant}"
    run_tune(settings, out, workers=1, method_factory=PeakedFake(golds, peak=1.4))
    return out


def test_the_dragin_rows_run_at_the_tuned_theta_and_the_table_prints_it(tmp_path):
    tuned = tune_dir(tmp_path, "reference")
    built = []
    report = reproduce(request(tmp_path, "dragin-table2", datasets=["hotpotqa"], rows=["dragin"], tuned=[tuned]),
                       method_factory=factory(answers(), built=built), progress=False)
    assert [c["options"]["theta"] for c, _, _ in built] == [1.4]
    text = render(report)
    assert f"Tuned: dragin at theta=1.4 (from {tuned}, trial" in text
    assert "in place of the rows' theta=1.2 (hotpotqa)." in text  # the released setting it replaced
    assert "| DRAGIN (tuned theta=1.4) |" in text


def test_a_tune_of_other_fixed_options_applies_to_no_row(tmp_path):
    tuned = tune_dir(tmp_path, None)  # the paper variant; the table's rows run the reference one
    with pytest.raises(ConfigError, match="tunes 'dragin' with default options, which no row of table 'dragin-table2' runs"):
        reproduce(request(tmp_path, "dragin-table2", datasets=["hotpotqa"], tuned=[tuned]),
                  method_factory=factory(answers()), progress=False)
    with pytest.raises(ConfigError, match="not a finished tune"):
        reproduce(request(tmp_path, "dragin-table2", tuned=[tmp_path]), method_factory=factory(answers()), progress=False)


def test_a_tuned_table_gets_a_record_of_its_own(tmp_path):
    """The rows at tuned values are another setting: their record never replaces the published ones'."""
    from dynrag.reproduce.record_build import RunContext, table_record
    from dynrag.reproduce.render import render_lines

    tuned = tune_dir(tmp_path, "reference")
    ids = []
    for given in ([], [tuned]):
        report = reproduce(request(tmp_path, "dragin-table2", datasets=["hotpotqa"], rows=["dragin"], tuned=given),
                           method_factory=factory(answers()), progress=False)
        ids.append(table_record(report, render_lines(report), RunContext("dynrag reproduce", 1.0, None, None)).id)
    assert ids[1] == f"{ids[0]}.tuned-tune-reference"
