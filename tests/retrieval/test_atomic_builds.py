"""Index builds are all-or-nothing, say what they will cost, and clean up after killed builds.
Real processes, real kill -9, the real packaged embedder.

Before: `index --dense` swapped the BM25 part into place before embedding, so a kill -9 while
embedding left the new BM25 part beside the old dense part (refused as stale): the old index was
lost. The dense part `ask --retriever hybrid` adds on first use started without a word.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dynrag.io.scratch import remove_stale_builds
from dynrag.retrieval.bm25 import BM25Index
from dynrag.retrieval.dense import DenseIndex
from tests.waiting import HANG_GUARD_S, kill_when

DYNRAG = [sys.executable, "-m", "dynrag.cli"]


def write_corpus(path: Path, n: int, word: str = "bridge") -> Path:
    rows = [{"id": f"p{i}", "title": f"Town {i}", "text": f"the {word} of town {i} crosses river {i % 7}"}
            for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def embedding_started(parent: Path):
    """True once a build's vectors.npy exists anywhere under ``parent`` except in a finished dense part."""
    def ready() -> bool:
        return any(".build-" in str(p) for p in parent.rglob("vectors.npy"))
    return ready


@pytest.mark.slow  # two real builds with the packaged embedder (~30 s)
def test_kill_9_while_index_dense_embeds_keeps_the_old_index_whole(tmp_path):
    out = tmp_path / "idx"
    old = write_corpus(tmp_path / "old.jsonl", 5, "ferry")
    r = subprocess.run([*DYNRAG, "index", str(old), "--out", str(out), "--dense"], capture_output=True, text=True,
                       timeout=HANG_GUARD_S)
    assert r.returncode == 0, r.stderr
    new = write_corpus(tmp_path / "new.jsonl", 3000)
    proc = subprocess.Popen([*DYNRAG, "index", str(new), "--out", str(out), "--dense"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    kill_when(proc, embedding_started(tmp_path), "embedding")
    assert proc.returncode == -signal.SIGKILL
    with BM25Index.load(out) as bm25:  # the old index, both parts, consistent
        assert len(bm25) == 5 and "ferry" in bm25.search("ferry", 1)[0].text
    with DenseIndex.load(out) as dense:
        assert len(dense) == 5 and dense.search("ferry of town 3", 1)[0].id == "p3"


def test_one_swap_for_both_parts(tmp_path, monkeypatch, embedder):
    """The dense part is written inside the build's temporary directory, before the one swap."""
    from dynrag.corpus import read_passages
    from dynrag.retrieval import index_build

    seen = []
    real = index_build.write_dense_part

    def spy(index_dir, *args, **kwargs):
        seen.append(Path(index_dir))
        return real(index_dir, *args, **kwargs)

    monkeypatch.setattr(index_build, "write_dense_part", spy)
    out = tmp_path / "idx"
    manifest, dense_manifest = index_build.build_index(read_passages(write_corpus(tmp_path / "c.jsonl", 4)), out,
                                                       embedder=embedder, progress=False)
    assert len(seen) == 1 and ".idx.build-" in seen[0].name and seen[0].parent == tmp_path
    assert manifest["passage_count"] == dense_manifest["count"] == 4
    assert DenseIndex.load(out).manifest["corpus_sha256"] == manifest["corpus_sha256"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl", "idx"]


@pytest.mark.slow  # loads the embedder in a subprocess, embeds 2,000 passages
def test_first_use_dense_part_announces_count_and_eta_shows_progress_and_survives_kill_9(tmp_path):
    from tests.tiny_models import save_tiny_llama

    index = tmp_path / "idx"
    corpus = write_corpus(tmp_path / "c.jsonl", 2000)
    assert subprocess.run([*DYNRAG, "index", str(corpus), "--out", str(index)], capture_output=True).returncode == 0
    model = save_tiny_llama(tmp_path / "tiny")
    ask = [*DYNRAG, "ask", "Which town has a bridge?", "--corpus", str(index), "--retriever", "hybrid",
           "--model", f"hf:{model}", "--option", "max_new_tokens=2"]

    # killed while embedding: the index is as it was, the build's temporary stays behind ...
    proc = subprocess.Popen(ask, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    kill_when(proc, embedding_started(index), "embedding")
    with BM25Index.load(index) as bm25:
        assert len(bm25) == 2000
    assert not (index / "dense").exists()
    leftovers = [p for p in index.iterdir() if p.name.startswith(".dense.build-")]
    assert len(leftovers) == 1

    # ... and the next use removes it, says what it will do, and shows progress
    r = subprocess.run(ask, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert r.returncode == 0, r.stderr
    said = " ".join(r.stderr.split())
    assert "2,000 passages" in said and "about" in said and str(index / "dense") in said, r.stderr
    assert "Embedding" in r.stderr and "passages/s" in r.stderr  # the progress bar: rate and ETA
    assert not any(p.name.startswith(".dense.build-") for p in index.iterdir())
    assert len(DenseIndex.load(index)) == 2000


def test_a_stale_build_is_removed_even_when_its_pid_now_belongs_to_another_process(tmp_path):
    """A killed build's pid may be reused (containers restart pids from 1): the next build must
    not mistake the new owner of the number for the builder."""
    out = tmp_path / "idx"
    out.mkdir()
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        stale = tmp_path / f".idx.build-{stranger.pid}-abcd"
        stale.mkdir()
        (stale / "passages.jsonl").write_text("half a build\n")
        stale_file = tmp_path / f".idx.write-{stranger.pid}-efgh.tmp"
        stale_file.write_text("half a file")
        an_hour_ago = time.time() - 3600  # left by a build killed a while ago
        for path in (stale, stale_file):
            os.utime(path, (an_hour_ago, an_hour_ago))
        assert sorted(remove_stale_builds(out)) == sorted([stale, stale_file])
        assert not stale.exists() and not stale_file.exists() and out.exists()
    finally:
        stranger.kill()
        stranger.wait()


def test_a_live_build_is_left_alone(tmp_path):
    """A build in progress (another process holding its temporary) survives a concurrent build's cleanup."""
    out = tmp_path / "idx"
    code = (
        "import sys, time\n"
        "from dynrag.io.directories import atomic_directory\n"
        f"with atomic_directory({str(out)!r}) as tmp:\n"
        "    (tmp / 'x').write_text('building')\n"
        "    print(tmp, flush=True)\n"
        "    time.sleep(86400)\n"  # until the test kills it
    )
    builder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        building = Path(builder.stdout.readline().strip())
        assert building.is_dir()
        assert remove_stale_builds(out) == [] and building.is_dir()
        os.kill(builder.pid, signal.SIGKILL)
        builder.wait()
        assert remove_stale_builds(out) == [building] and not building.exists()
    finally:
        builder.kill() if builder.poll() is None else None
