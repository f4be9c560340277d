"""`dynrag world make` and `world check` through the command line (in-process)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from dynrag.world.knowledge import Knowledge
from dynrag.world.make import make_world
from tests.cli_inprocess import run_in_process
from tests.world.fixtures import TINY

SMALL = ["--people", "2", "--companies", "2", "--schools", "1", "--towns", "1", "--real-facts", "0"]


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


def one_line_error(r) -> str:
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_make_refuses_a_file_and_a_folder_of_other_files_and_leaves_them_alone(tmp_path: Path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("keep")
    line = one_line_error(run_in_process("world", "make", "--out", a_file, *SMALL))
    assert f"--out {a_file}: is a file, not a directory" in line and "File exists" not in line
    assert a_file.read_text() == "keep"
    other = tmp_path / "mine"
    other.mkdir()
    (other / "thesis.tex").write_text("do not touch")
    line = one_line_error(run_in_process("world", "make", "--out", other, *SMALL))
    assert f"--out {other}: exists and is not a world directory" in line and "thesis.tex" in line
    assert [p.name for p in other.iterdir()] == ["thesis.tex"]
    index = tmp_path / "index"  # an index's manifest.json does not make it a world
    index.mkdir()
    (index / "manifest.json").write_text(json.dumps({"format": "dynrag-bm25", "seed": 1, "options": {}, "sha256": {}}))
    assert "is not a world directory" in one_line_error(run_in_process("world", "make", "--out", index, *SMALL))
    assert [p.name for p in index.iterdir()] == ["manifest.json"]


def test_make_again_into_a_world_or_what_a_killed_make_left_remakes_it_in_place(tmp_path: Path):
    world = tmp_path / "w"
    first = run_in_process("world", "make", "--out", world, *SMALL)
    assert first.returncode == 0, first.stderr
    manifest = (world / "manifest.json").read_bytes()
    (world / "index").mkdir()  # an index built inside the world (docs/world.md) is no reason to refuse it
    again = run_in_process("world", "make", "--out", world, *SMALL)
    assert again.returncode == 0, again.stderr
    assert (world / "manifest.json").read_bytes() == manifest
    other_seed = run_in_process("world", "make", "--out", world, *SMALL, "--seed", "9")
    assert other_seed.returncode == 0 and json.loads((world / "manifest.json").read_text())["seed"] == 9
    # Killed before its manifest: only the world's own files and a probe log are there.
    killed = tmp_path / "killed"
    assert run_in_process("world", "make", "--out", killed, *SMALL).returncode == 0
    (killed / "manifest.json").unlink()
    (killed / "probe-bundled.jsonl").write_text("")
    (killed / "test.jsonl").unlink()
    resumed = run_in_process("world", "make", "--out", killed, *SMALL)
    assert resumed.returncode == 0, resumed.stderr
    assert (killed / "manifest.json").read_bytes() == manifest and (killed / "test.jsonl").exists()


def test_check_of_a_world_made_without_model_says_so_and_names_the_command_that_probes_it(tmp_path: Path):
    world = tmp_path / "w"
    sizes = [*SMALL, "--seed", "4", "--questions", "5", "--train-share", "0.4"]
    assert run_in_process("world", "make", "--out", world, *sizes).returncode == 0
    line = one_line_error(run_in_process("world", "check", "--world", world, "--model", "bundled:smollm2"))
    assert f"--world {world}: was made without --model" in line and "None" not in line
    command = shlex.split(re.search(r"`([^`]*)`", line).group(1))
    assert command[:5] == ["dynrag", "world", "make", "--model", "bundled:smollm2"]
    # The command names this very world: without its probe it makes the same bytes.
    args = command[5:]
    args[args.index("--out") + 1] = str(tmp_path / "again")
    assert run_in_process("world", "make", *args).returncode == 0
    assert (tmp_path / "again" / "manifest.json").read_bytes() == (world / "manifest.json").read_bytes()


def test_check_of_a_world_probed_with_another_model_names_both(tmp_path: Path):
    make_world(TINY, tmp_path, Knowledge("hf:other", {}))
    line = one_line_error(run_in_process("world", "check", "--world", tmp_path, "--model", "bundled:smollm2"))
    assert f"--model bundled:smollm2: {tmp_path} was probed with hf:other, not bundled:smollm2" in line
    assert "--model hf:other" in line and "world make --model bundled:smollm2" in line
