"""`dynrag eval`: answer a benchmark's questions with one method into a resumable run directory.

The model and the index are loaded once per run; each finished question is one fsynced line of
predictions.jsonl; re-running the same command skips finished ids; summary.json/summary.md are
recomputed from predictions.jsonl at the end of every run.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from dynrag.errors import ConfigError, DataError
from dynrag.lm.loader import resolve_model
from dynrag.io import atomic_write_json, atomic_write_text
from dynrag.eval.boundary import knowledge_boundary
from dynrag.eval.execution import Executor, MethodFactory, WorkerJob, check_execution, make_executor
from dynrag.eval.loaders import LoadReport, QAExample, dataset_spec, load_aliases
from dynrag.eval.metrics import Scorer, open_scorer
from dynrag.eval.steps import check_corpus, corpus_index, load_questions
from dynrag.eval.rundir import (
    SUMMARY_JSON,
    SUMMARY_MD,
    EVAL_RUN_FORMAT,
    PREDICTIONS,
    PredictionWriter,
    check_run_dir,
    deduplicate_predictions,
    lock_run,
    open_run,
    read_eval_config,
    read_predictions,
    unique_by_id,
    write_run_yaml,
)
from dynrag.eval.summary import make_record, summarize, summary_markdown
from dynrag.methods.base import Method
from dynrag.registry import parse_pairs
from dynrag.retrieval.base import Retriever

RUN_FORMAT = EVAL_RUN_FORMAT



@dataclass
class EvalRequest:
    """What the user asked for, before resolution into config.json."""

    dataset: str
    data: Path
    method: str
    out: Path
    corpus: str | None = None  # "contexts", an index directory, or None
    limit: int | None = None
    model: str = "bundled"
    options: dict[str, Any] = field(default_factory=dict)  # raw KEY=VALUE values
    exemplars: str | None = None
    aliases: Path | None = None
    skip_bad: bool = False
    baseline: Path | None = None
    retriever: str | None = None  # a RETRIEVERS name; None: the chain preset's, else bm25
    # raw KEY=VALUE strings (from the command line) or a mapping of values (from a config file)
    retriever_options: list[str] | dict[str, Any] = field(default_factory=list)
    scorer: str = "squad"  # how answers are scored (dynrag.eval.metrics.SCORERS)
    # How to run, not what: none is part of config.json, so a run may resume with other values.
    workers: int | str = 1  # local worker processes, or "auto" (see execution.auto_workers)
    dask: str | None = None  # a Dask scheduler address: answer on that cluster instead
    concurrency: int = 1  # questions in flight on threads sharing one model behind an HTTP server


def file_sha256(path: Path, shown: Path | None = None) -> str:
    """sha256 of a file; a read error names ``shown`` (the path as the user gave it) or ``path``."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise DataError(str(shown or path), f"cannot read ({exc.strerror or exc})") from exc
    return digest.hexdigest()


def resolve_config(req: EvalRequest) -> dict[str, Any]:
    """config.json: every input that decides the answers, resolved (defaults filled in)."""
    from dynrag.methods.registry import method_traits, parse_options

    spec = dataset_spec(req.dataset)
    from dynrag.eval.metrics import SCORERS

    SCORERS.get(req.scorer)  # an unknown scorer fails now, naming the choices
    if req.limit is not None and req.limit < 1:
        raise ConfigError(f"--limit must be at least 1 (got {req.limit})")
    options = parse_options(req.method, req.options).model_dump()
    exemplars = req.exemplars or spec.exemplar_style
    from dynrag.methods.prompting import PromptBuilder

    PromptBuilder.for_dataset(exemplars)  # an unknown style fails now, not after loading the model
    if req.aliases is not None and spec.name != "2wikimultihopqa":
        raise ConfigError("--aliases applies to --dataset 2wikimultihopqa only")
    corpus: str | None = None
    corpus_sha = None
    retriever: str | None = None
    retriever_options: dict[str, Any] | None = None
    if not method_traits(req.method).needs_retrieval and (req.retriever or req.retriever_options):
        raise ConfigError(f"--retriever/--retriever-option: method {req.method!r} does not retrieve")
    if method_traits(req.method).needs_retrieval:
        from dynrag.methods.chain import preset_retriever
        from dynrag.retrieval.factory import given_options

        retriever = req.retriever or preset_retriever(options)
        given = req.retriever_options
        values = dict(given) if isinstance(given, dict) else parse_pairs(given, "--retriever-option")
        retriever_options = given_options(retriever, values, "--retriever-option")
        from dynrag.retrieval.factory import needs_index

        if not needs_index(retriever):
            if req.corpus:  # the server's index is the corpus
                raise ConfigError(f"--corpus: retriever {retriever!r} searches its server's index; drop --corpus")
            corpus_sha = server_corpus_sha256(retriever, retriever_options)
        elif not req.corpus:
            raise ConfigError(f"method {req.method!r} retrieves: pass --corpus contexts or --corpus INDEX_DIR")
        else:
            index_dir = check_corpus(req.corpus)
            corpus = "contexts"
            if index_dir is not None:
                from dynrag.retrieval.store import read_manifest

                corpus = str(index_dir.resolve())
                corpus_sha = read_manifest(corpus)["corpus_sha256"]
    data = Path(req.data).resolve()
    if data.is_dir():
        raise DataError(str(req.data), f"is a directory; --data takes the benchmark file itself ({spec.name})")
    if not data.is_file():
        raise DataError(str(req.data), "no such file")
    return {
        "format": RUN_FORMAT,
        "method": req.method,
        "options": options,
        "model": resolve_model(req.model),
        "dataset": spec.name,
        "data": str(data),
        "data_sha256": file_sha256(data, Path(req.data)),
        "aliases": str(Path(req.aliases).resolve()) if req.aliases else None,
        "aliases_sha256": file_sha256(Path(req.aliases)) if req.aliases else None,
        "corpus": corpus,
        "corpus_sha256": corpus_sha,
        "retriever": retriever,
        "retriever_options": retriever_options,
        "limit": req.limit,
        "exemplars": exemplars,
        "scorer": req.scorer,
    }


def server_corpus_sha256(name: str, options: dict[str, Any]) -> str | None:
    """The corpus checksum a search server's index records (so a resumed run notices a rebuilt
    index); opening it also fails early, in one line, on a wrong URL or a missing index."""
    from dynrag.retrieval.base import close_retriever
    from dynrag.retrieval.factory import open_retriever

    retriever = open_retriever(name, None, options, work_dir=Path("."), progress=False)
    try:
        return (getattr(retriever, "meta", None) or {}).get("corpus_sha256")
    finally:
        close_retriever(retriever)


def run_yaml(config: dict[str, Any], req: EvalRequest) -> dict[str, Any]:
    """The run as ``dynrag.config.RunConfig`` keys, resolved: what config.yaml holds."""
    keys = ("method", "options", "model", "exemplars", "retriever", "retriever_options", "corpus",
            "dataset", "data", "limit", "aliases")
    run = {key: config[key] for key in keys}
    run["retriever_options"] = run["retriever_options"] or {}
    run.update(skip_bad=req.skip_bad, baseline=str(Path(req.baseline).resolve()) if req.baseline else None,
               out=str(Path(req.out).resolve()))
    return {key: value for key, value in run.items() if value is not None}


def default_method_factory(config: dict[str, Any], retriever: Retriever | None) -> Method:
    from dynrag.lm import load_lm
    from dynrag.methods.prompting import PromptBuilder
    from dynrag.methods.registry import build_method

    lm = load_lm(config["model"])
    return build_method(config["method"], lm, retriever, config["options"], PromptBuilder.for_dataset(config["exemplars"]))


def _stats(records: list[dict[str, Any]]) -> str:
    if not records:
        return "EM –  F1 –"
    n = len(records)
    em = sum(r["em"] for r in records) / n
    f1 = sum(r["f1"] for r in records) / n
    ret = sum(r["retrievals"] for r in records) / n
    return f"EM {100 * em:5.1f}  F1 {100 * f1:5.1f}  ret/q {ret:.2f}"


def run_eval(
    req: EvalRequest,
    *,
    method_factory: MethodFactory | None = None,
    console: Console | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Run (or resume) an evaluation; returns the summary written to summary.json."""
    console = console or Console(stderr=True, emoji=False)
    config = resolve_config(req)
    check_execution(workers=req.workers, dask=req.dask, concurrency=req.concurrency)  # before anything is written
    check_concurrency(req.concurrency, config["model"], custom_method=method_factory is not None)
    spec = dataset_spec(config["dataset"])
    aliases = load_aliases(Path(req.aliases)) if req.aliases else None
    examples, report = load_questions(
        spec.name, req.data, console, aliases=aliases, skip_bad=req.skip_bad, limit=req.limit
    )

    out = Path(req.out)
    from dynrag.methods.budget import check_question
    from dynrag.methods.registry import parse_options

    # Everything that can be checked is checked before the run directory is touched.
    for ex in examples:
        check_question(ex.question, where=f"{req.data}: question {ex.id!r}")
    check_run_dir(out, "eval")
    if req.baseline is not None:
        check_baseline(Path(req.baseline), config, examples)
    # The lock is held from before predictions.jsonl is read until the summary is written: a
    # second process on this directory fails here, at once, naming this one's pid.
    with lock_run(out):
        note = open_run(out, config, option_defaults=parse_options(config["method"], {}).model_dump())
        if note:
            console.print(Text(note), soft_wrap=True)
        write_run_yaml(out, run_yaml(config, req))
        done = _finished(out, console)
        by_id = {ex.id: ex for ex in examples}
        stray = [r["id"] for r in done if r["id"] not in by_id]
        if stray:
            raise DataError(str(out / PREDICTIONS), f"holds ids not in this dataset (e.g. {stray[0]!r})")
        done_ids = {r["id"] for r in done}
        todo = [ex for ex in examples if ex.id not in done_ids]
        if done:
            console.print(Text(f"resuming {out}: {len(done)} of {len(examples)} questions already answered"), soft_wrap=True)

        if todo:
            index_dir = None
            if config["corpus"]:
                index_dir = corpus_index(config["corpus"], out, examples, console, progress)
            job = WorkerJob(config, str(index_dir) if index_dir else None, str(out),
                            method_factory or default_method_factory)
            executor = make_executor(job, workers=req.workers, dask=req.dask, concurrency=req.concurrency,
                                     todo=len(todo), progress=progress)
            console.print(Text(f"method {config['method']}, model {config['model']}: {len(todo)} questions to answer"
                               f" ({executor.description})"), soft_wrap=True)
            _answer_all(executor, todo, done, out, run_scorer(config), console, progress, len(examples))

        return write_summary(out, config, examples, report, baseline=req.baseline)


def _finished(out: Path, console: Console) -> list[dict[str, Any]]:
    """The records already in predictions.jsonl, a torn last line cut away and, if two writers
    once appended to the file at the same time, each id's first record only (the file rewritten)."""
    done, dropped = deduplicate_predictions(out, read_predictions(out, repair=True))
    if dropped:
        console.print(Text(
            f"{out / PREDICTIONS}: held {dropped} duplicate record(s) (two runs wrote it at once?); "
            "kept the first record of each question and rewrote the file"
        ), soft_wrap=True)
    return done


def check_concurrency(concurrency: int, model: str, custom_method: bool = False) -> None:
    from dynrag.lm.loader import is_http_spec

    if concurrency > 1 and not custom_method and not is_http_spec(model):
        raise ConfigError(
            f"--concurrency {concurrency} needs a model behind an HTTP server (--model openai:BASE_URL#MODEL); "
            f"model {model!r} runs in this process and answers one question at a time"
        )


def _answer_all(
    executor: Executor,
    todo: list[QAExample],
    done: list[dict[str, Any]],
    out: Path,
    scorer: Scorer,
    console: Console,
    progress: bool,
    total: int,
) -> None:
    """Answer ``todo`` with ``executor``; this loop alone appends to predictions.jsonl, one fsynced
    line per question as each finishes (in finishing order), so each is written exactly once."""
    records = list(done)
    by_id = {ex.id: ex for ex in todo}
    written: set[str] = set()
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[stats]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with PredictionWriter(out) as writer, Progress(*columns, console=console, disable=not progress) as bar:
        task = bar.add_task("eval", total=total, completed=len(done), stats=_stats(records))
        for outcome in executor.answers([(ex.id, ex.question) for ex in todo]):
            if outcome.id in written or outcome.id not in by_id:
                continue  # a question answered twice (a retried worker's late reply): keep the first
            written.add(outcome.id)
            record = make_record(by_id[outcome.id], outcome.answer, outcome.seconds, yes_no=False, scorer=scorer)
            writer.append(record)
            records.append(record)
            bar.update(task, advance=1, stats=_stats(records))


def write_summary(
    out: Path,
    config: dict[str, Any],
    examples: list[QAExample],
    report: LoadReport | None = None,
    baseline: Path | None = None,
) -> dict[str, Any]:
    """Recompute summary.json and summary.md from predictions.jsonl (only ids of this dataset)."""
    ids = {ex.id for ex in examples}
    predictions = [p for p in unique_by_id(read_predictions(out))[0] if p["id"] in ids]
    meta: dict[str, Any] = {"method": config["method"], "model": config["model"], "dataset": config["dataset"]}
    if report is not None and report.skipped:
        meta["skipped_records"] = report.skipped
    if report is not None and report.excluded:
        meta["excluded_records"] = sum(report.excluded.values())
    has_support = any(ex.supporting for ex in examples)
    meta["scorer"] = config.get("scorer", "squad")
    summary = summarize(predictions, has_support, dataset_spec(config["dataset"]).yes_no, meta, run_scorer(config))
    if baseline is not None:
        summary["knowledge_boundary"] = baseline_figures(predictions, Path(baseline), config)
    atomic_write_json(out / SUMMARY_JSON, summary)
    atomic_write_text(out / SUMMARY_MD, summary_markdown(summary))
    return summary


def run_scorer(config: dict[str, Any]) -> Scorer:
    """The scorer a run's config names (runs made before scorers were a choice: squad)."""
    spec = dataset_spec(config["dataset"])
    return open_scorer(config.get("scorer", "squad"), spec.name, spec.yes_no)


def check_baseline(baseline: Path, config: dict[str, Any], examples: list[QAExample] | None = None) -> dict[str, Any]:
    """``--baseline``: an eval run on the same data, sharing questions with this one; its config."""
    base_config = read_eval_config(baseline, f"--baseline {baseline}")
    for key in ("dataset", "data_sha256"):
        if base_config.get(key) != config.get(key):
            raise ConfigError(f"--baseline {baseline}: a run on different data ({key} differs)")
    if examples is not None:
        ids = {ex.id for ex in examples}
        if not any(r["id"] in ids for r in read_predictions(baseline)):
            raise ConfigError(f"--baseline {baseline}: has answered none of these questions")
    return base_config


def baseline_figures(predictions: list[dict[str, Any]], baseline: Path, config: dict[str, Any]) -> dict[str, Any]:
    base_config = check_baseline(baseline, config)
    base = unique_by_id(read_predictions(baseline))[0]
    figures = knowledge_boundary(predictions, base)
    if figures["n"] == 0:
        raise ConfigError(f"--baseline {baseline}: shares no answered questions with this run")
    return {"baseline": str(baseline), "baseline_method": base_config.get("method"), **figures}
