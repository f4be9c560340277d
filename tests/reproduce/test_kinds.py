"""Each reproduce table has one kind of job, whose registry entry says which flags it reads; the
command itself never names a table."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from dynrag.errors import ConfigError
from dynrag.reproduce.catalog import table_names
from dynrag.reproduce.kinds import KINDS, ReproduceRequest, kind_of

CLI = Path(__file__).resolve().parents[2] / "src" / "dynrag" / "reproduce" / "cli.py"


def test_every_table_has_exactly_one_kind():
    for table in table_names():
        owners = [kind.name for kind in KINDS if kind.owns(table)]
        assert len(owners) == 1, (table, owners)
    with pytest.raises(ConfigError, match="unknown table 'dragin-table9'; choose one of: .*dragin-table2"):
        kind_of("dragin-table9")


def test_the_command_names_no_table():
    text = CLI.read_text(encoding="utf-8")
    assert not [t for t in table_names() if f'"{t}"' in text or f"'{t}'" in text]


def test_the_command_line_is_typed_once_and_unknown_keys_are_errors():
    with pytest.raises(ValidationError, match="extra"):
        ReproduceRequest(table="world", reader={"x": "y"})
    args = ReproduceRequest(table="world", model="bundled", rows=["dragin"], workers=2)
    assert args.given() == ["rows", "workers"]


def test_a_flag_a_kind_does_not_read_is_refused_in_one_line_naming_it():
    with pytest.raises(ConfigError, match=r"^bestpractice-table1 reads only .*; drop --reader, --row$"):
        kind_of("bestpractice-table1").check(ReproduceRequest(table="bestpractice-table1", rows=["x"], readers={"a": "b"}))
    with pytest.raises(ConfigError, match="drop --corpus, --tuned"):
        kind_of("bestpractice-table2").check(ReproduceRequest(table="bestpractice-table2", corpus="idx", tuned=[Path("t")]))
    with pytest.raises(ConfigError, match="--workers: deeprag-figure3 does not answer through eval runs"):
        kind_of("deeprag-figure3").check(ReproduceRequest(table="deeprag-figure3", workers=2))
    with pytest.raises(ConfigError, match="--results: bestpractice-figure3 writes no result record"):
        kind_of("bestpractice-figure3").check(ReproduceRequest(table="bestpractice-figure3", results=Path("r")))
    with pytest.raises(ConfigError, match="only `reproduce bestpractice-figure3` reads trained readers; drop --reader"):
        kind_of("dragin-table2").check(ReproduceRequest(table="dragin-table2", readers={"a": "b"}))
    kind_of("world").check(ReproduceRequest(table="world", world=Path("w"), tuned=[Path("t")], workers="auto"))


def test_a_data_file_without_its_dataset_is_refused_by_the_tables_that_need_one(tmp_path):
    from tests.cli_inprocess import run_in_process

    data = tmp_path / "dev.json"
    data.write_text("[]", encoding="utf-8")
    r = run_in_process("reproduce", "dragin-table2", "--data", str(data), "--no-run", "--out", str(tmp_path / "o"))
    assert r.returncode != 0 and f"--data {data}: name its dataset, DATASET=FILE" in r.stderr
    two = run_in_process("reproduce", "dragin-table2", "--data", str(data), "--data", str(data), "--no-run")
    assert two.returncode != 0 and "name each file's dataset" in two.stderr and "Traceback" not in two.stderr
