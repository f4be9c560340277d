"""`dynrag reproduce bestpractice-table1`: the query classifier (does a request need retrieval?)
scored three ways, beside the paper's Table 1.

1. Held-out split: refitted on the train part of the training script's own split (same seed, same
   L2 choice: classify/training.py) and scored on the held-out requests. The shipped weights were
   refitted on every request, so they are not scored on these.
2. Benchmark questions (every one needs outside knowledge): the share the shipped classifier sends
   to retrieval, per dataset file found (`--data`, `--data-dir`: reproduce/runs.py's places).
3. A world (`--world DIR`): the shipped classifier's decisions against each test question's
   ``world.needs_retrieval`` (questions without that truth are left out).

Each part is one JSON file under ``OUT/bestpractice-table1/``, written atomically with the key of
what decided it (file digests, settings); a rerun reads back every part whose key still matches.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dynrag.classify.logistic import predict_proba
from dynrag.classify.query import QueryClassifier, default_weights_path
from dynrag.classify.training import (
    FOLDS, L2_GRID, SEED, TEST_FRACTION, binary_scores, default_examples_path, flipped, holdout_fit, read_examples,
    score_decisions,
)
from dynrag.errors import ConfigError, DataError
from dynrag.io.files import atomic_write_json, file_sha256
from dynrag.reproduce.retrieval_runs import LOADERS
from dynrag.reproduce.runs import ReproduceRequest, find_data
from dynrag.reproduce.tables import Table, paper_cells, published

NAME = "bestpractice-table1"
FORMAT = "dynrag-table1-part/1"
DATASETS = ["hotpotqa", "2wikimultihopqa", "musique", "nq", "popqa"]
THRESHOLD = 0.5  # the default classify_threshold: retrieve when p(needs retrieval) >= this
METRICS = [("accuracy", "Acc"), ("precision", "Prec"), ("recall", "Rec"), ("f1", "F1")]  # the paper's names
PAPER_SETTING = ("BERT-base-multilingual-cased fine-tuned on the authors' 111K-sample set of 15 task types, "
                 "each request labelled by whether it needs retrieval")


class Parts:
    """The parts under ``root``: each read back when its key matches, else computed and written;
    ``status`` says which, ``cost`` what each computed one took (wall and CPU seconds)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.status: dict[str, str] = {}

    def get(self, name: str, key: dict[str, Any], compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        path = self.root / f"{name}.json"
        try:
            old = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
        except (OSError, ValueError):
            old = None  # a damaged part is computed again
        if isinstance(old, dict) and old.get("key") == key:
            self.status[name] = "reused"
            return old
        wall, cpu = time.perf_counter(), time.process_time()
        part = compute()
        part = {"key": key, **part, "cost": {"wall_s": round(time.perf_counter() - wall, 3),
                                             "cpu_s": round(time.process_time() - cpu, 3)}}
        atomic_write_json(path, part)
        self.status[name] = "computed"
        return part


class Models:
    """The shipped classifier and its embedder, loaded on first need (a rerun that reuses every part loads neither)."""

    def __init__(self, progress: bool):
        self.progress = progress
        self.classifier = QueryClassifier.load()  # the weights only: cheap

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.classifier.check_embedder().encode(texts, progress=self.progress).astype(np.float64)

    def p_retrieve(self, texts: list[str]) -> np.ndarray:
        """The shipped classifier's p(needs retrieval) for each text."""
        if not texts:
            return np.zeros(0)
        return predict_proba(self.embed(texts), self.classifier.w, self.classifier.b)


def heldout_part(models: Models, examples: Path) -> dict[str, Any]:
    """Refit on the train part exactly as scripts/train_query_classifier.py does; score the held-out part."""
    texts, y, tasks = read_examples(examples)
    x = models.embed(texts)
    held = holdout_fit(x, y, test_fraction=TEST_FRACTION, seed=SEED)
    p = predict_proba(x[held.test], held.w, held.b)
    pred, truth = p >= THRESHOLD, y[held.test] == 1
    c = score_decisions(pred, truth)
    per_task: dict[str, dict[str, Any]] = {}
    for j, i in enumerate(held.test):
        row = per_task.setdefault(tasks[i], {"needs_retrieval": bool(y[i]), "n": 0, "right": 0})
        row["n"] += 1
        row["right"] += int(pred[j] == truth[j])
    wrong = [{"text": texts[i], "task": tasks[i], "needs_retrieval": bool(y[i]), "p": round(float(p[j]), 4)}
             for j, i in enumerate(held.test) if pred[j] != truth[j]]
    return {"n_examples": len(texts), "n_train": len(held.train), "n_test": len(held.test),
            "n_tasks": len(set(tasks)), "l2": held.l2, "cv": {f"{k:g}": v for k, v in held.cv.items()},
            "needs_retrieval": binary_scores(c), "self_contained": binary_scores(flipped(c)),
            "per_task": dict(sorted(per_task.items(), key=lambda kv: (not kv[1]["needs_retrieval"], kv[0]))),
            "wrong": wrong}


def questions_part(models: Models, dataset: str, path: Path, limit: int | None, console) -> dict[str, Any]:
    """How many of a benchmark file's questions the shipped classifier sends to retrieval."""
    from dynrag.eval.steps import load_questions

    examples, _ = load_questions(LOADERS.get(dataset, dataset), path, console, limit=limit)
    texts = [ex.question for ex in examples]
    p = models.p_retrieve(texts)
    lowest = sorted((float(p[i]), texts[i]) for i in np.flatnonzero(p < THRESHOLD))[:2]
    return {"dataset": dataset, "data": str(path), "n": len(texts), "retrieve": int((p >= THRESHOLD).sum()),
            "share": float(np.mean(p >= THRESHOLD)), "lowest": [{"p": round(q, 4), "question": t} for q, t in lowest]}


def world_part(models: Models, test: Path, limit: int | None, console) -> dict[str, Any]:
    """The shipped classifier's decisions against the world's truth, question by question."""
    from dynrag.eval.steps import load_questions

    examples, _ = load_questions("world", test, console, limit=limit)
    judged = [ex for ex in examples if ex.needs_retrieval is not None]
    p = models.p_retrieve([ex.question for ex in judged])
    c = score_decisions(p >= THRESHOLD, [ex.needs_retrieval for ex in judged])
    return {"data": str(test), "n": len(examples), "unjudged": len(examples) - len(judged),
            "needs_retrieval": binary_scores(c), "self_contained": binary_scores(flipped(c))}


def world_split(world: Path) -> Path:
    """DIR/test.jsonl of a world directory, with a clear error when DIR holds none."""
    from dynrag.world.make import read_manifest

    if not Path(world).is_dir():
        raise DataError(str(world), "--world: no such directory (make a world with `dynrag world make --out DIR`)")
    read_manifest(world)
    test = Path(world) / "test.jsonl"
    if not test.is_file():
        raise DataError(str(test), "the world has no test split (make it again with `dynrag world make --out DIR`)")
    return test


def table1(found: dict[str, Path], missing: dict[str, str], world_test: Path | None, limit: int | None, out: Path,
           console, progress: bool) -> dict[str, Any]:
    """Every part, computed or read back; returns what ``render_table1`` prints."""
    started_wall, started_cpu = time.perf_counter(), time.process_time()
    parts = Parts(Path(out) / NAME)
    models = Models(progress)
    weights = file_sha256(default_weights_path())
    examples = default_examples_path()
    n = f"n{limit or 'all'}"
    heldout = parts.get("heldout", {"format": FORMAT, "examples_sha256": file_sha256(examples), "seed": SEED,
                                    "test_fraction": TEST_FRACTION, "l2_grid": list(L2_GRID), "folds": FOLDS,
                                    "embedding_model": models.classifier.embedding_model, "threshold": THRESHOLD},
                        lambda: heldout_part(models, examples))
    questions = {}
    for ds, path in found.items():
        console.print(f"{ds}: {path}")
        key = {"format": FORMAT, "data_sha256": file_sha256(path), "weights_sha256": weights, "limit": limit,
               "threshold": THRESHOLD}
        questions[ds] = parts.get(f"questions-{ds}-{n}", key,
                                  lambda ds=ds, path=path: questions_part(models, ds, path, limit, console))
    world = None
    if world_test is not None:
        digest = file_sha256(world_test)
        key = {"format": FORMAT, "data_sha256": digest, "weights_sha256": weights, "limit": limit, "threshold": THRESHOLD}
        world = parts.get(f"world-{digest[:12]}-{n}", key, lambda: world_part(models, world_test, limit, console))
    return {"heldout": heldout, "questions": questions, "missing": missing, "world": world, "world_dir": world_test,
            "limit": limit, "status": parts.status, "root": parts.root,
            "cost": {"wall_s": time.perf_counter() - started_wall, "cpu_s": time.process_time() - started_cpu,
                     "loadavg": os.getloadavg()}}


# ---- the markdown ------------------------------------------------------------------------------


def _f(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _row(label: str, data: str, n: Any, scores: dict[str, Any]) -> str:
    return f"| {label} | {data} | {n} | " + " | ".join(_f(scores.get(k)) for k, _ in METRICS) + " |"


def _counts(s: dict[str, Any]) -> str:
    return f"TP {s['tp']}, FP {s['fp']}, FN {s['fn']}, TN {s['tn']}"


def render_table1(report: dict[str, Any]) -> str:
    held, world = report["heldout"], report["world"]
    paper = paper_cells(NAME, "paper")["query_classification"]["bert_base_multilingual"]
    ours = (f"logistic regression on all-MiniLM-L6-v2 sentence embeddings, trained on this project's "
            f"{held['n_examples']} self-made requests over {held['n_tasks']} task types")
    lines = [
        "# RAG best practices, Table 1: query classification (does a request need retrieval?)", "",
        f"Paper: {PAPER_SETTING}. Ours: {ours}; they stand in for the paper's 15-task set. Positive class: "
        f"\"needs retrieval\" unless a row says otherwise; retrieve when p(needs retrieval) >= {THRESHOLD}.", "",
        "| model | data | n | " + " | ".join(name for _, name in METRICS) + " |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        _row("paper: BERT-base-multilingual-cased", "their 15-task set", "–", paper),
        _row(f"ours: MiniLM + logistic regression, fitted on {held['n_train']}", f"our {held['n_test']} held-out requests", held["n_test"],
             held["needs_retrieval"]),
        _row("ours, \"self-contained\" as positive", f"our {held['n_test']} held-out requests", held["n_test"],
             held["self_contained"]),
    ]
    if world is not None:
        lines.append(_row("ours: shipped weights", "world test split", world["needs_retrieval"]["n"], world["needs_retrieval"]))
    cv = ", ".join(f"{k} {v:.4f}" for k, v in held["cv"].items())
    lines += [
        "", "## Held-out split", "",
        f"Stratified split (seed {SEED}, {TEST_FRACTION:g} held out): {held['n_train']} train, {held['n_test']} held out; "
        f"L2 {held['l2']:g} chosen by {FOLDS}-fold cross-validation on the train part ({cv}). "
        f"Counts: {_counts(held['needs_retrieval'])}.",
        "The shipped weights were refitted on all the requests, these held-out ones included, so scoring them "
        "here would leak: this model is fitted on the train part only, as the training script does.", "",
        "| task | label | held out | right |", "| --- | --- | --- | --- |",
        *(f"| {t} | {'needs retrieval' if r['needs_retrieval'] else 'self-contained'} | {r['n']} | {r['right']} |"
          for t, r in held["per_task"].items()),
        *([""] + [f"- wrong ({w['task']}, p = {w['p']:.2f}): {w['text']}" for w in held["wrong"]] if held["wrong"] else []),
        "", "## Benchmark questions (every one needs outside knowledge)", "",
        "Share the shipped classifier sends to retrieval: its recall on a set of positives only "
        f"({'first ' + str(report['limit']) if report['limit'] else 'all'} questions per dataset).", "",
        "| dataset | n | sent to retrieval | share | lowest p(needs retrieval) |", "| --- | --- | --- | --- | --- |",
    ]
    for ds, q in report["questions"].items():
        low = "; ".join(f"{x['p']:.2f}: {x['question']}" for x in q["lowest"]) or "–"
        lines.append(f"| {ds} | {q['n']} | {q['retrieve']} | {_f(q['share'])} | {low} |")
    lines += [f"| {ds} | – | – | – | {why} |" for ds, why in report["missing"].items()]
    lines += ["", "## World", ""]
    if world is None:
        lines.append("Not run: give `--world DIR` (a directory written by `dynrag world make`).")
    else:
        s = world["needs_retrieval"]
        lines += [
            f"`{report['world_dir']}`: {s['n']} test questions with a known truth (`world.needs_retrieval`; "
            f"{world['unjudged']} without one left out). {_counts(s)}; sent to retrieval "
            f"{s['tp'] + s['fp']} of {s['n']}. " + ", ".join(f"{name} {_f(s[k])}" for k, name in METRICS) + ".",
            "The classifier judges the task type, not what the model knows, so it is expected to send nearly "
            "all world questions to retrieval, the ones the model knows included.",
        ]
    cost = report["cost"]
    status = ", ".join(f"{name} {state}" for name, state in report["status"].items())
    spent = ", ".join(f"{name} {p['cost']['wall_s']:.1f} s wall / {p['cost']['cpu_s']:.1f} s CPU"
                      for name, p in [("held-out", held), *report["questions"].items(), ("world", world)] if p)
    lines += [
        "", "## Cost", "",
        f"This command: {cost['wall_s']:.1f} s wall, {cost['cpu_s']:.1f} s CPU; load average "
        + " ".join(f"{x:.2f}" for x in cost["loadavg"]) + f". Parts under `{report['root']}`: {status}.",
        f"When each part was computed: {spent}.", "",
        f"Source: {published()['tables'][NAME]['source']}",
    ]
    return "\n".join(lines) + "\n"


def table1_command(*, data_dir: Path | None, data: dict[str, Path], world: Path | None, limit: int | None,
                   out: Path, console, progress: bool) -> str:
    """The `reproduce bestpractice-table1` flags checked and run; returns the markdown."""
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be at least 1 (got {limit})")
    table = Table(NAME, "Best-practices Table 1", list(DATASETS), [], lambda _: [], {}, PAPER_SETTING)
    found, missing = find_data(table, ReproduceRequest(table=NAME, data=dict(data), data_dir=data_dir))
    test = world_split(world) if world is not None else None
    return render_table1(table1(found, missing, test, limit, out, console, progress))
