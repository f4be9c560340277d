"""`dynrag world make` and `world check` through the command line (in-process)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli_inprocess import run_in_process


def test_make_writes_a_world_and_the_same_bytes_twice(tmp_path: Path):
    args = ["world", "make", "--seed", "3", "--people", "4", "--companies", "2", "--schools", "1", "--towns", "2",
            "--real-facts", "2", "--questions", "6", "--comparisons", "2"]
    a = run_in_process(*args, "--out", tmp_path / "a")
    b = run_in_process(*args, "--out", tmp_path / "b")
    assert a.returncode == 0 and b.returncode == 0, a.stderr
    assert json.loads(a.stdout)["counts"] == json.loads(b.stdout)["counts"]
    assert (tmp_path / "a" / "manifest.json").read_bytes() == (tmp_path / "b" / "manifest.json").read_bytes()
    assert json.loads((tmp_path / "a" / "manifest.json").read_text())["seed"] == 3


def test_a_bad_size_is_one_line_naming_the_option(tmp_path: Path):
    r = run_in_process("world", "make", "--out", tmp_path, "--people", "1")
    assert r.returncode == 1 and "people" in r.stderr and "Traceback" not in r.stderr


def test_check_refuses_a_world_probed_with_another_model(tmp_path: Path):
    assert run_in_process("world", "make", "--out", tmp_path, "--people", "2", "--companies", "2", "--schools", "1",
                      "--towns", "1", "--real-facts", "0").returncode == 0
    r = run_in_process("world", "check", "--world", tmp_path, "--model", "bundled")
    assert r.returncode == 1 and "world make --model bundled" in r.stderr
    missing = run_in_process("world", "check", "--world", tmp_path / "none")
    assert missing.returncode == 1 and "manifest.json" in missing.stderr
