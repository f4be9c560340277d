"""dynrag.io: atomic writes, directory swaps, JSONL append/read, the directory lock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dynrag.errors import DataError
from dynrag.io.directories import atomic_directory
from dynrag.io.files import read_json, atomic_file, atomic_write_json, atomic_write_text
from dynrag.io.jsonl import JsonlAppender, read_jsonl
from dynrag.io.lock import DirectoryLock, LockedError
from dynrag.io.scratch import remove_stale_builds
from tests.waiting import HANG_GUARD_S, wait_for


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "a.json"
    atomic_write_json(target, {"x": 1})
    atomic_write_json(target, {"x": 2})
    assert json.loads(target.read_text()) == {"x": 2}
    assert [p.name for p in target.parent.iterdir()] == ["a.json"]


def test_atomic_write_failure_keeps_old_file(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    atomic_write_text(target, "old")
    with pytest.raises(TypeError):
        atomic_write_json(target, {"x": object()})
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_atomic_file_streams_and_an_error_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "joined.bin"
    with atomic_file(target) as f:
        for part in (b"ab", b"cd"):
            f.write(part)
    assert target.read_bytes() == b"abcd"
    with pytest.raises(RuntimeError):
        with atomic_file(target) as f:
            f.write(b"half")
            raise RuntimeError("source died")
    assert target.read_bytes() == b"abcd"
    assert [p.name for p in tmp_path.iterdir()] == ["joined.bin"]


def test_atomic_directory_swaps_only_when_complete(tmp_path: Path) -> None:
    out = tmp_path / "index"
    with atomic_directory(out) as tmp:
        (tmp / "f").write_text("v1")
    assert (out / "f").read_text() == "v1"
    with pytest.raises(RuntimeError):
        with atomic_directory(out) as tmp:
            (tmp / "f").write_text("v2")
            raise RuntimeError("crash mid-build")
    assert (out / "f").read_text() == "v1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index"]
    with atomic_directory(out) as tmp:
        (tmp / "g").write_text("v3")
    assert sorted(p.name for p in out.iterdir()) == ["g"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index"]


def test_atomic_directory_check_can_refuse(tmp_path: Path) -> None:
    def refuse(out: Path) -> None:
        raise DataError(str(out), "not mine")

    with pytest.raises(DataError):
        with atomic_directory(tmp_path / "x", check=refuse):
            pass
    assert list(tmp_path.iterdir()) == []


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_builds_of_dead_processes_are_removed(tmp_path: Path) -> None:
    out = tmp_path / "index"
    out.mkdir()
    dead = _dead_pid()
    stale = tmp_path / f".index.build-{dead}-abc"
    stale.mkdir()
    (stale / "junk").write_text("x")
    live = tmp_path / f".index.build-{os.getpid()}-def"
    live.mkdir()
    other = tmp_path / f".other.build-{dead}-abc"
    other.mkdir()
    assert remove_stale_builds(out) == [stale]
    assert live.exists() and other.exists() and not stale.exists()


def test_interrupted_swap_restores_previous_directory(tmp_path: Path) -> None:
    out = tmp_path / "index"
    old = tmp_path / f".index.old-{_dead_pid()}-xyz"
    (old / "previous").mkdir(parents=True)
    (old / "previous" / "f").write_text("kept")
    remove_stale_builds(out)
    assert (out / "f").read_text() == "kept"
    assert not old.exists()


def test_jsonl_append_and_read_roundtrip(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    with JsonlAppender(path) as w:
        w.append({"id": "a", "text": "é"})
        w.append({"id": "b"})
    assert read_jsonl(path) == [{"id": "a", "text": "é"}, {"id": "b"}]
    assert read_jsonl(tmp_path / "missing.jsonl") == []


def test_jsonl_torn_last_line_is_dropped_and_repaired(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'{"id": "a"}\n{"id": "b"}\n{"id": "c", "te')
    assert read_jsonl(path) == [{"id": "a"}, {"id": "b"}]
    assert path.read_bytes().endswith(b"te")  # not repaired without repair=True
    read_jsonl(path, repair=True)
    assert path.read_bytes() == b'{"id": "a"}\n{"id": "b"}\n'
    with JsonlAppender(path) as w:
        w.append({"id": "c"})
    assert [r["id"] for r in read_jsonl(path)] == ["a", "b", "c"]


def test_jsonl_bad_middle_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'{"id": "a"}\n\nnot json\n{"id": "b"}\n')
    with pytest.raises(DataError, match=r"p\.jsonl:3: not valid JSON: expecting value at column 1 \("):
        read_jsonl(path)


def test_jsonl_written_whole_has_no_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'{"id": "a"}\n{"id": "b"}')  # no final newline: fine for a whole file
    assert read_jsonl(path, whole=True) == [{"id": "a"}, {"id": "b"}]
    path.write_bytes(b'{"id": "a"}\n{"id": ')
    with pytest.raises(DataError, match=r"p\.jsonl:2: not valid JSON: expecting value at column 7 \(the text ends before the JSON does"):
        read_jsonl(path, whole=True)


def test_jsonl_validate_rejects_wrong_shape(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'[1, 2]\n{"id": "a"}\n')
    with pytest.raises(DataError, match=r"p\.jsonl:1: not an object"):
        read_jsonl(path, validate=lambda r: None if isinstance(r, dict) else "not an object")


HOLD = """
import sys, time
from dynrag.io.lock import DirectoryLock
DirectoryLock(sys.argv[1]).acquire()
print("locked", flush=True)
time.sleep(86400)  # until the test kills it
"""


def test_lock_names_holder_and_is_freed_by_kill_9(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(LockedError, match=rf"pid {proc.pid}\b"):
            DirectoryLock(run).acquire()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=HANG_GUARD_S)
        def acquired():  # the kernel drops the flock as the process is reaped
            try:
                return DirectoryLock(run).acquire()
            except LockedError:
                return None

        lock = wait_for(acquired, "the killed holder's lock to be dropped")
        assert (run / ".lock").read_text().strip() == str(os.getpid())
        lock.release()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_read_json_names_the_file_and_what_it_should_hold(tmp_path):
    good = tmp_path / "config.json"
    good.write_text('{"a": [1, 2]}', encoding="utf-8")
    assert read_json(good, "run config") == {"a": [1, 2]}
    bad = tmp_path / "broken.json"
    bad.write_text('{"a": ', encoding="utf-8")
    with pytest.raises(DataError, match=r"broken\.json: unreadable run config: not valid JSON: expecting value at column 6 \(the text ends before"):
        read_json(bad, "run config")
    with pytest.raises(DataError, match=r"missing\.json: unreadable summary \("):
        read_json(tmp_path / "missing.json", "summary")


def test_atomic_writes_get_the_mode_a_plain_open_gives(tmp_path: Path) -> None:
    import stat

    def mode(path: Path) -> int:
        return stat.S_IMODE(path.stat().st_mode)

    old = tmp_path / "old.json"
    old.write_text("{}")
    old.chmod(0o600)
    before = os.umask(0o027)
    try:
        atomic_write_json(tmp_path / "new.json", {"x": 1})
        atomic_write_json(old, {"x": 2})  # replaced by a new file: the old one's mode goes with it
        with atomic_file(tmp_path / "streamed.bin") as f:
            f.write(b"x")
        with open(tmp_path / "plain.txt", "w") as f:
            f.write("x")
        with atomic_directory(tmp_path / "index") as tmp:
            (tmp / "f").write_text("x")
        (tmp_path / "plain-dir").mkdir()
    finally:
        os.umask(before)
    assert mode(tmp_path / "plain.txt") == 0o640
    assert [mode(tmp_path / n) for n in ("new.json", "old.json", "streamed.bin")] == [0o640] * 3
    assert mode(tmp_path / "index") == mode(tmp_path / "plain-dir") == 0o750
    assert json.loads(old.read_text()) == {"x": 2}


def test_every_question_loop_resumes_through_resume_records(tmp_path):
    """Eval's loop and the reader figure's share one start: a torn last line cut, each id's first
    record kept (the file rewritten), and records of other questions refused."""
    from dynrag.errors import DataError
    from dynrag.io.rundir import PREDICTIONS, resume_records

    run = tmp_path / "run"
    run.mkdir()
    (run / PREDICTIONS).write_text('{"id": "a", "em": 1}\n{"id": "b", "em": 0}\n{"id": "a", "em": 0}\n{"id": "c", "e',
                                   encoding="utf-8")
    resumed = resume_records(run, ["a", "b", "c"])
    assert [r["id"] for r in resumed.done] == ["a", "b"] and resumed.done[0]["em"] == 1 and resumed.dropped == 1
    assert (run / PREDICTIONS).read_text(encoding="utf-8") == '{"id": "a", "em": 1}\n{"id": "b", "em": 0}\n'
    said = resumed.messages(run, 3)
    assert "held 1 duplicate record(s)" in said[0] and said[1] == f"resuming {run}: 2 of 3 questions already answered"
    with pytest.raises(DataError, match="holds ids not in this dataset \\(e.g. 'b'\\)"):
        resume_records(run, ["a"])
