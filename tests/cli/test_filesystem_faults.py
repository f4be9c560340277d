"""Filesystem faults give one line naming the path and the OS's reason, and lose nothing.

Real faults: a read-only tmpfs, a full tmpfs (tests/mounts.py: a private mount namespace, since
root writes through chmod), a file whose read fails (/proc/self/mem reads give EIO). Before, each
of these ended in a raw traceback, and `ask --trace` to an unwritable path lost the answer.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from tests.cli_inprocess import run_in_process
from tests.eval import fixtures as fx
from tests.mounts import in_mount, mounts_unavailable
from tests.tiny_models import save_tiny_llama

pytestmark = pytest.mark.skipif(mounts_unavailable() is not None, reason=str(mounts_unavailable()))


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return save_tiny_llama(tmp_path_factory.mktemp("model") / "tiny")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    rows = [{"id": f"p{i}", "title": f"Town {i}", "text": f"the old bridge of town {i} spans the river " * 20}
            for i in range(60)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def one_line_error(stderr: str, *needles: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, stderr
    for needle in needles:
        assert needle in lines[0], (needle, stderr)
    return lines[0]


@pytest.mark.slow  # a CLI child process in a mount namespace: over a second each
def test_index_out_on_a_read_only_disk(tmp_path, corpus):
    r = in_mount(tmp_path / "m", f'dynrag index {corpus} --out "$M/idx"', options="ro")
    assert r.returncode == 1
    one_line_error(r.stderr, str(tmp_path / "m" / "idx"), "Read-only file system")


@pytest.mark.slow  # over a second of CPU: `make test` runs it, `make test-fast` does not
def test_index_rebuild_on_a_full_disk_keeps_the_old_index(tmp_path, corpus):
    small = tmp_path / "small.jsonl"
    small.write_text(json.dumps({"id": "a", "title": "A", "text": "the alpha bridge"}) + "\n")
    script = f"""
dynrag index {small} --out "$M/idx" >/dev/null 2>&1 || echo "first build failed"
dd if=/dev/zero of="$M/.fill" bs=4k 2>/dev/null
dynrag index {corpus} --out "$M/idx"
echo "rc=$?"
{sys.executable} -c "from dynrag.retrieval.bm25 import BM25Index; print('passages', len(BM25Index.load('$M/idx')))"
ls -a "$M"
"""
    r = in_mount(tmp_path / "m", script, options="size=256k")
    assert "first build failed" not in r.stdout, r.stderr
    assert "rc=1" in r.stdout, r.stdout + r.stderr
    one_line_error(r.stderr, str(tmp_path / "m" / "idx"), "No space left on device")
    assert "passages 1" in r.stdout  # the previous index is intact and loads
    assert ".idx.build-" not in r.stdout  # the half-built temporary was removed


@pytest.mark.slow  # a CLI child process in a mount namespace: over a second each
def test_eval_out_read_only_and_full(tmp_path, tiny_model):
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fx.qa_rows(3))
    command = (f'dynrag eval --dataset jsonl --data {data} --method direct --model hf:{tiny_model} '
               f'--option max_new_tokens=2 --out "$M/run"')
    r = in_mount(tmp_path / "ro", command, options="ro")
    assert r.returncode == 1
    one_line_error(r.stderr, str(tmp_path / "ro" / "run"), "Read-only file system")
    r = in_mount(tmp_path / "full", command, options="size=64k", fill=True)
    assert r.returncode == 1
    one_line_error(r.stderr, str(tmp_path / "full" / "run"), "No space left on device")


@pytest.mark.slow
def test_eval_whose_disk_fills_mid_run_keeps_every_answer_and_resumes_once_there_is_room(tmp_path, tiny_model):
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fx.qa_rows(40))
    command = (f'dynrag eval --dataset jsonl --data {data} --method direct --model hf:{tiny_model} '
               f'--option max_new_tokens=3 --out "$M/run" --no-progress')
    # 16 KiB: the lock, config.json, config.yaml and a page of predictions, then ENOSPC mid-run
    script = f"""
{command}
echo "rc=$?"
echo "lines $(wc -l < "$M/run/predictions.jsonl")"
mount -o remount,size=1m "$M"
{command} >/dev/null
echo "rc=$?"
{sys.executable} -c "
import json
ids = [json.loads(l)['id'] for l in open('$M/run/predictions.jsonl')]
print('total', len(ids), 'unique', len(set(ids)))"
"""
    r = in_mount(tmp_path / "m", script, options="size=16k")
    out = r.stdout
    assert "rc=1" in out, out + r.stderr
    one_line_error(r.stderr, "predictions.jsonl", "No space left on device")
    written = int(out.split("lines ")[1].split()[0])
    assert 0 < written < 40, out
    assert "rc=0" in out and "total 40 unique 40" in out, out + r.stderr


@pytest.mark.slow  # a CLI child process in a mount namespace: over a second each
def test_eval_retrieval_out_read_only(tmp_path):
    data = fx.write_json(tmp_path / "hotpot.json", fx.HOTPOT)
    r = in_mount(tmp_path / "m", f'dynrag eval-retrieval --dataset hotpotqa --data {data} --out "$M/r" '
                 "--option backend=numpy", options="ro")
    assert r.returncode == 1
    one_line_error(r.stderr, str(tmp_path / "m" / "r"), "Read-only file system")


def test_ask_trace_to_a_read_only_disk_fails_before_answering(tmp_path, tiny_model):
    r = in_mount(tmp_path / "m", f'dynrag ask "Who built the bridge?" --method direct --model hf:{tiny_model} '
                 '--option max_new_tokens=2 --trace "$M/trace.json"', options="ro")
    assert r.returncode == 1 and r.stdout == ""
    one_line_error(r.stderr, str(tmp_path / "m"), "Read-only file system")
    assert "loading model" not in r.stderr  # it failed before any work


@pytest.mark.slow
def test_ask_trace_to_a_full_disk_still_shows_the_answer(tmp_path, tiny_model):
    r = in_mount(tmp_path / "m", f'dynrag ask "Who built the bridge?" --method direct --model hf:{tiny_model} '
                 '--option max_new_tokens=2 --json --trace "$M/trace.json"', options="size=16k", fill=True)
    assert r.returncode == 1
    one_line_error(r.stderr, str(tmp_path / "m" / "trace.json"), "No space left on device")
    answer = json.loads(r.stdout)  # the answer came out before the trace failed
    assert answer["question"] == "Who built the bridge?" and answer["method"] == "direct"


def test_a_file_whose_read_fails(tmp_path):
    # Reading /proc/self/mem at offset 0 fails with EIO in whatever process reads it: this one too.
    corpus = tmp_path / "corpus.jsonl"
    os.symlink("/proc/self/mem", corpus)
    r = run_in_process("index", corpus, "--out", tmp_path / "i")
    assert r.returncode == 1
    one_line_error(r.stderr, str(corpus), "Input/output error")
    data = tmp_path / "qa.jsonl"
    os.symlink("/proc/self/mem", data)
    r = run_in_process("eval", "--dataset", "jsonl", "--data", data, "--method", "direct", "--out", tmp_path / "run")
    assert r.returncode == 1
    one_line_error(r.stderr, str(data), "Input/output error")
    assert not (tmp_path / "run").exists()
