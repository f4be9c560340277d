"""`dynrag reproduce bestpractice-figure3`: the base model and fine-tuned readers (`dynrag train
reader`) answering dev questions under four contexts, scored by ground-truth coverage.

Contexts (training/reader_examples.py): g (gold passages), r (one random passage of another dev
question, drawn with the same seeded rule as in training), gr (gold then random) and none (no
passages). Every (model, context) cell is its own run directory

    OUT/<model>/<dataset>/figure3-<context>-n<limit>/config.json, predictions.jsonl, summary.json

opened, locked and appended with the eval run-directory helpers (io/rundir.py), so a killed run
resumes at the first unanswered question and never answers one twice. The answer is `single`'s
(methods/answering.py: the same prompt, the same answer extraction) with the context's passages
in place of retrieved ones.

Coverage: the extracted final answer contains a gold answer (datasets/metrics.py `covers`); the whole
generated text's coverage and EM/F1 are recorded too. The paper's Figure 3 is a bar chart whose
values its text does not give, so no published column is printed.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rich.console import Console

from dynrag.training.reader_examples import (
    EVAL_CONTEXTS,
    ORDER_HELP,
    RandomPassages,
    as_hits,
    check_order,
    context_passages,
    gold_passages,
)
from dynrag.errors import ConfigError, DataError
from dynrag.datasets.examples import QAExample
from dynrag.datasets.loaders import load_examples
from dynrag.reproduce.bestpractice_figure3_claims import figure3_claims
from dynrag.reproduce.runs import slug
from dynrag.datasets.metrics import best_token_scores, covers, exact_match
from dynrag.io.rundir import (
    PredictionWriter,
    lock_run,
    open_run,
    read_predictions,
    resume_records,
)
from dynrag.io.files import atomic_write_json
from dynrag.methods.answering import answer_once
from dynrag.methods.base import Trace
from dynrag.methods.prompting import PromptBuilder
from dynrag.progress import progress_bar

NAME = "bestpractice-figure3"
FORMAT = "dynrag-figure3-run/1"
TITLES = {"g": "D_g", "r": "D_r", "gr": "D_gr", "none": "D_∅"}
SOURCE = ("Wang et al., Searching for Best Practices in Retrieval-Augmented Generation, 2024: Section 3.8 and "
          "Figure 3 (Llama-2-7B as the base generator, ground-truth coverage on the dev sets). The figure's bar values are not in the text, so there is no published column; the paper's "
          "finding is that M_gr is best when given gold or mixed context.")


@dataclass
class Figure3Plan:
    """What `figure3_command` resolves the request's flags to: the one dev file, the readers as model
    specs, the passage order, and the figure's own fixed settings (exemplars, answer budget, seed)."""

    dataset: str
    data: Path
    readers: dict[str, str] = field(default_factory=dict)  # row key (g, gr, ...) -> model spec
    model: str = "bundled"  # the base model, M_b
    limit: int | None = None
    out: Path = Path("runs/reproduce")
    exemplars: str = "default"
    max_new_tokens: int = 64
    seed: int = 0
    run: bool = True
    order: str = "gold_first"  # the passages' order in each prompt, as the readers were trained


def reader_spec(value: str) -> str:
    """A --reader value: a model spec (hf:..., bundled...) or a directory written by `dynrag train reader`."""
    from dynrag.lm.spec import ModelSpec, is_model_spec

    if is_model_spec(value):
        return value
    path = Path(value)
    if not path.is_dir():
        raise ConfigError(f"--reader {value!r}: no such directory (give a `dynrag train reader --out` directory "
                          "or a model spec such as hf:DIR)")
    return str(ModelSpec.for_path(path))


def parse_readers(pairs: dict[str, str]) -> dict[str, str]:
    return {key: reader_spec(value) for key, value in pairs.items()}


def rows(req: Figure3Plan) -> list[tuple[str, str, str]]:
    """(row key, label, model spec): the base model, then each reader in the order given."""
    return [("base", "M_b (base)", req.model)] + [(key, f"M_{key}", spec) for key, spec in req.readers.items()]


def cell_dir(req: Figure3Plan, resolved_model: str, context: str) -> Path:
    shuffled = "-shuffled" if req.order == "shuffled" else ""
    return Path(req.out) / slug(resolved_model) / req.dataset / f"figure3-{context}-n{req.limit or 'all'}{shuffled}"


def cell_config(req: Figure3Plan, resolved_model: str, context: str, data_sha256: str) -> dict[str, Any]:
    """What decides a cell's answers: a second command resumes only when it resolves to the same."""
    return {"format": FORMAT, "model": resolved_model, "dataset": req.dataset, "data": str(req.data),
            "data_sha256": data_sha256, "limit": req.limit, "context": context, "exemplars": req.exemplars,
            "max_new_tokens": req.max_new_tokens, "seed": req.seed,
            **({"order": req.order} if req.order != "gold_first" else {}),
            # the keys eval's open_run fills in for old eval configs, set here so they are never filled
            "retriever": None, "retriever_options": None, "scorer": "coverage"}


def score_record(example: QAExample, context: str, passages: list, answer: Any, seconds: float) -> dict[str, Any]:
    final, text = answer.final_answer, answer.text
    return {
        "id": example.id, "question": example.question, "answers": example.answers, "context": context,
        "passages": [p.id for p in passages], "prediction": text, "final_answer": final,
        "coverage": covers(final, example.answers), "coverage_text": covers(text, example.answers),
        "em": exact_match(final, example.answers), "f1": round(best_token_scores(final, example.answers).f1, 6),
        "seconds": round(seconds, 3),
    }


def summarize_cell(records: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(records)

    def mean(key: str) -> float | None:
        return round(sum(float(r[key]) for r in records) / n, 6) if n else None

    return {"n": n, "coverage": mean("coverage"), "coverage_text": mean("coverage_text"), "em": mean("em"),
            "f1": mean("f1"), "seconds_per_question": mean("seconds")}


def run_cell(model: Callable[[], Any], builder: PromptBuilder, questions: list[QAExample], draw: RandomPassages, context: str,
             out: Path, config: dict[str, Any], max_new_tokens: int, console: Console, progress: bool,
             order: str = "gold_first") -> dict[str, Any]:
    """Answer (or resume) every question of one cell; returns its summary (also OUT/summary.json).
    ``model()`` gives the model, loaded on first need (a finished cell loads none)."""
    with lock_run(out):
        note = open_run(out, config)
        if note:
            console.print(note)
        resumed = resume_records(out, [ex.id for ex in questions])
        for line in resumed.messages(out, len(questions)):
            console.print(line, highlight=False)
        done = resumed.done
        done_ids = {r["id"] for r in done}
        todo = [ex for ex in questions if ex.id not in done_ids]
        lm = model() if todo else None
        with PredictionWriter(out) as writer, progress_bar(f"{context}", len(questions), len(questions) - len(todo),
                                                           console, progress, unit="questions") as bar:
            for ex in todo:
                passages = context_passages(context, gold_passages(ex), draw.for_question(ex), order,
                                            f"{draw.seed}:{ex.id}")
                started = time.perf_counter()
                trace = Trace(ex.question, "single", getattr(lm, "name", "model"), {"context": context})
                answer = answer_once(lm, builder, trace, ex.question, as_hits(passages) or None, max_new_tokens, started)
                record = score_record(ex, context, passages, answer, time.perf_counter() - started)
                writer.append(record)
                done.append(record)
                bar.advance(f"coverage {sum(r['coverage'] for r in done) / len(done):.3f}")
        summary = {**summarize_cell(done), "model": config["model"], "context": context}
        atomic_write_json(out / "summary.json", summary)
        return summary


def dev_questions(req: Figure3Plan) -> list[QAExample]:
    questions = [ex for ex in load_examples(req.dataset, req.data, limit=req.limit)]
    without = [ex.id for ex in questions if not gold_passages(ex)]
    if without:
        raise DataError(str(req.data), f"question {without[0]!r} has no gold (supporting) passages; figure 3 "
                                       "needs a dataset with them (hotpotqa, 2wikimultihopqa, musique)")
    if not questions:
        raise DataError(str(req.data), "no questions")
    return questions


def figure3(req: Figure3Plan, *, console: Console | None = None, progress: bool = True,
            load: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """Run (or resume) every cell; returns what `render_figure3` prints. ``load(spec)`` opens a
    model (default `dynrag.lm.load_lm`; tests pass a fake)."""
    console = console or Console(stderr=True)
    if req.limit is not None and req.limit < 1:
        raise ConfigError(f"--limit must be at least 1 (got {req.limit})")
    if not Path(req.data).is_file():
        raise DataError(str(req.data), "--data: no such file")
    builder = PromptBuilder.for_dataset(req.exemplars)
    questions = dev_questions(req)
    draw = RandomPassages(questions, req.seed)
    sha = hashlib.sha256(Path(req.data).read_bytes()).hexdigest()
    if load is None:
        from dynrag.lm import load_lm

        def load(spec: str) -> Any:
            return load_lm(spec, progress=progress)

    results: dict[tuple[str, str], dict[str, Any] | None] = {}
    cells: dict[tuple[str, str], Path] = {}
    table_rows = rows(req)
    resolved = {key: _resolved(spec) for key, _, spec in table_rows}
    for i, (key, label, spec) in enumerate(table_rows, 1):
        dirs = {c: cell_dir(req, resolved[key], c) for c in EVAL_CONTEXTS}
        cells.update({(key, c): d for c, d in dirs.items()})
        if not req.run:
            results.update({(key, c): _summary(d) for c, d in dirs.items()})
            continue
        console.print(f"[bold]model {i}/{len(table_rows)}[/bold] {label}: {spec}")
        loaded: list[Any] = []

        def model(spec: str = spec) -> Any:
            if not loaded:
                loaded.append(load(spec))
            return loaded[0]

        for context, out in dirs.items():
            config = cell_config(req, resolved[key], context, sha)
            results[(key, context)] = run_cell(model, builder, questions, draw, context, out, config,
                                               req.max_new_tokens, console, progress, req.order)
    return {"request": req, "rows": table_rows, "results": results, "cells": cells, "n": len(questions)}


def cell_records(report: dict[str, Any]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Each finished cell's per-question records, by (row key, context)."""
    return {cell: read_predictions(out) for cell, out in report.get("cells", {}).items()
            if (out / "predictions.jsonl").is_file()}


def _resolved(spec: str) -> str:
    """The model's resolved spec (a run directory's name); a test double's own name as it is."""
    from dynrag.lm.loader import resolve_model
    from dynrag.lm.spec import is_model_spec

    try:
        return resolve_model(spec)
    except ConfigError:
        if is_model_spec(spec):
            raise
        return spec


def _summary(out: Path) -> dict[str, Any] | None:
    import json

    path = out / "summary.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def render_figure3(report: dict[str, Any]) -> str:
    req: Figure3Plan = report["request"]
    results = report["results"]
    lines = [
        "# RAG best practices, Figure 3: generator fine-tuning", "",
        f"Ours: {req.dataset} `{req.data}`, first {req.limit or 'all'} questions ({report['n']}), base model "
        f"`{req.model}`, the `single` prompt ({req.exemplars} exemplars), passages "
        f"{'in a seeded order per question' if req.order == 'shuffled' else 'gold first'}. Cells: ground-truth coverage of the final "
        "answer (coverage of the whole generated text / EM in brackets). No paper column: the figure's values "
        "are not given in the paper's text.", "",
        "| model | " + " | ".join(TITLES[c] for c in EVAL_CONTEXTS) + " |",
        "|" + "|".join(" --- " for _ in range(len(EVAL_CONTEXTS) + 1)) + "|",
    ]
    for key, label, _ in report["rows"]:
        cells = []
        for c in EVAL_CONTEXTS:
            s = results.get((key, c))
            cells.append("–" if not s else f"{_fmt(s['coverage'])} ({_fmt(s['coverage_text'])} / {_fmt(s['em'])})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "Paper's finding: the model trained with gold and random passages (M_gr) covers the answer best "
              "when given gold or mixed context. Decided per metric; the finding rests on the extracted answer "
              "(reproduce/bestpractice_figure3_claims.py says why):", "",
              *figure3_claims(report["rows"], cell_records(report)), "", f"Source: {SOURCE}"]
    return "\n".join(lines) + "\n"


def figure3_command(*, dataset: list[str], data: list[str], readers: dict[str, str], model: str, limit: int | None,
                    out: Path, run: bool, console: Console, progress: bool, options: dict[str, str] | None = None) -> str:
    """The `reproduce bestpractice-figure3` flags checked and run; returns the markdown. Its one
    ``--option`` is ``order`` (gold_first | shuffled), which should match how the readers were trained."""
    options = dict(options or {})
    order = check_order(options.pop("order", "gold_first"), flag="--option order")
    if options:
        raise ConfigError(f"{NAME}: unknown --option {sorted(options)[0]!r}; the one option is order ({ORDER_HELP})")
    if len(dataset) != 1:
        raise ConfigError(f"{NAME} needs one --dataset (the format of --data), e.g. --dataset hotpotqa")
    if len(data) != 1:
        raise ConfigError(f"{NAME} needs one --data FILE: the dev questions with gold passages")
    path = data[0].split("=", 1)[1] if "=" in data[0] and not Path(data[0]).exists() else data[0]
    req = Figure3Plan(dataset[0], Path(path), parse_readers(readers), model, limit, out, run=run, order=order)
    return render_figure3(figure3(req, console=console, progress=progress))
