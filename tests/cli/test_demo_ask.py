"""`dynrag demo` and `dynrag ask` end to end through the real command line (slow)."""

import json
import re
import subprocess
import sys

import pytest

from dynrag.data import load_demo_questions
from dynrag.demo import QUICK_QUESTIONS, ordered_demo_questions
from tests.waiting import HANG_GUARD_S

pytestmark = pytest.mark.slow


def dynrag(*args, env=None):
    return subprocess.run([sys.executable, "-m", "dynrag.cli", *args], capture_output=True, text=True,
                          timeout=HANG_GUARD_S, env=env)


def test_demo_shows_where_dragin_retrieves_what_it_asks_and_finds():
    import os

    r = dynrag("demo", env=dict(os.environ, COLUMNS="200"))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert re.search(r"model bundled:\S+ loaded in \d+\.\d s", out)
    questions = {q.id: q for q in load_demo_questions()}
    for i, qid in enumerate(QUICK_QUESTIONS, 1):
        assert f"[{i}/{len(QUICK_QUESTIONS)}] {qid}" in out  # a progress line per question
        assert questions[qid].question in out
    for label in ("closed book (direct)", "one retrieval (single)", "dynamic (dragin)"):
        assert len(re.findall(rf"^{re.escape(label)} ", out, flags=re.MULTILINE)) == len(QUICK_QUESTIONS)
    assert "words shaded by trigger score" in out and "⟲" in out  # where dragin's retrieval fired
    # a retrieval dragin decided while writing: its trigger word, position, the QFS query, the hits
    fired = re.findall(r"retrieval \d \[RIND \d+\.\d\d > 0\.3 at '[^']+'\] after \d+ tokens\s+query: (.+)", out)
    assert len(fired) >= len(QUICK_QUESTIONS) and all(q.strip() for q in fired)
    assert re.search(r"^\s+\d+\.\d\d\s+\S", out, flags=re.MULTILINE)  # passages with their scores
    flat = " ".join(out.split())
    assert f"exact match on {len(QUICK_QUESTIONS)} questions: closed book" in flat
    assert "next:" in flat and "dynrag eval" in flat and "dynrag demo --full" in flat


def test_demo_full_prints_answers_passages_and_times():
    import os

    r = dynrag("demo", "--full", "--limit", "2", "--model", "bundled:smollm2", env=dict(os.environ, COLUMNS="200"))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    questions = ordered_demo_questions()[:2]
    for q in questions:
        assert q.question in out
    assert out.count("retrieval 1") == 2
    assert "without retrieval" in out and "exact match" in out
    assert re.search(r"single-hop\s.*\s2\s.*/2\s.*/2", out)  # the summary row of the two questions asked
    assert re.search(r"\d+\.\d s", out)  # time taken per answer
    assert re.search(r"^\s+\d+\.\d\d\s+\S", out, flags=re.MULTILINE)  # passages with their scores


def test_ask_writes_the_trace_file(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(json.dumps(p) for p in [
        {"id": "1", "title": "Velmora Bridge", "text": "The Velmora Bridge was designed by the engineer Ansel Quist."},
        {"id": "2", "title": "Ansel Quist", "text": "Ansel Quist was an engineer born in Harrowgate in 1851."},
        {"id": "3", "title": "Harrowgate", "text": "Harrowgate is a market town on the River Lune."},
    ]) + "\n")
    assert dynrag("index", str(corpus), "--out", str(tmp_path / "idx")).returncode == 0
    trace = tmp_path / "trace.json"
    r = dynrag("ask", "Who designed the Velmora Bridge?", "--corpus", str(tmp_path / "idx"), "--method", "dragin",
               "--model", "bundled:smollm2", "--option", "theta=0", "--option", "max_retrievals=1", "--trace", str(trace), "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(trace.read_text())
    assert data == json.loads(r.stdout)
    for key in ("question", "answer", "final_answer", "retrievals", "generated_tokens", "steps"):
        assert key in data
    assert data["retrievals"][0]["query"] and data["retrievals"][0]["hits"][0]["title"]
    assert {"id", "title", "text", "score"} <= set(data["retrievals"][0]["hits"][0])
    scored = [s for s in data["steps"] if "score" in s["details"]]
    assert scored and {"words", "entropy", "attention", "score", "content", "trigger"} <= set(scored[0]["details"])
