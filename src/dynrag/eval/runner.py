"""`dynrag eval`: answer a benchmark's questions with one method into a resumable run directory.

The model and the index are loaded once per run; each finished question is one fsynced line of
predictions.jsonl; re-running the same command skips finished ids; summary.json/summary.md are
recomputed from predictions.jsonl at the end of every run.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from dynrag.errors import ConfigError, DataError
from dynrag.io import atomic_write_json, atomic_write_text
from dynrag.eval.boundary import knowledge_boundary
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

# (resolved config, retriever or None) -> a ready Method; the default loads the model once.
MethodFactory = Callable[[dict[str, Any], Retriever | None], Method]


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
    # Questions in flight at once (a model behind an HTTP server only). Not part of config.json:
    # it changes how fast answers come, not what they are, so a run may resume with another value.
    concurrency: int = 1


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


def resolve_model(spec: str) -> str:
    """`bundled` -> `bundled:<default>`, so a later change of default cannot resume into a run;
    model options (`?kv_reuse=...`) are kept. A spec that cannot load fails here, before the run
    directory is written."""
    from dynrag.lm.loader import check_model_spec

    spec = check_model_spec(spec)
    if spec.startswith("openai:"):
        return spec
    spec, sep, model_options = spec.partition("?")
    if spec == "bundled" or spec.startswith("bundled:"):
        from dynrag.lm.bundled import resolve_bundled

        spec = f"bundled:{resolve_bundled(spec.partition(':')[2]).name}"
    return spec + sep + model_options


def resolve_config(req: EvalRequest) -> dict[str, Any]:
    """config.json: every input that decides the answers, resolved (defaults filled in)."""
    from dynrag.methods.registry import NO_RETRIEVAL, parse_options

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
    if req.method in NO_RETRIEVAL and (req.retriever or req.retriever_options):
        raise ConfigError(f"--retriever/--retriever-option: method {req.method!r} does not retrieve")
    if req.method not in NO_RETRIEVAL:
        from dynrag.methods.chain import preset_retriever
        from dynrag.retrieval.factory import given_options

        retriever = req.retriever or preset_retriever(options)
        given = req.retriever_options
        values = dict(given) if isinstance(given, dict) else parse_pairs(given, "--retriever-option")
        retriever_options = given_options(retriever, values, "--retriever-option")
        if not req.corpus:
            raise ConfigError(f"method {req.method!r} retrieves: pass --corpus contexts or --corpus INDEX_DIR")
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
            retriever = None
            if config["corpus"]:
                index_dir = corpus_index(config["corpus"], out, examples, console, progress)
                retriever = _open_retriever(config, index_dir, out, progress)
            console.print(Text(f"method {config['method']}, model {config['model']}: {len(todo)} questions to answer"), soft_wrap=True)
            method = (method_factory or default_method_factory)(config, retriever)
            _answer_all(method, todo, done, out, run_scorer(config), console, progress, len(examples), req.concurrency)

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

    if concurrency < 1:
        raise ConfigError(f"--concurrency must be at least 1 (got {concurrency})")
    if concurrency > 1 and not custom_method and not is_http_spec(model):
        raise ConfigError(
            f"--concurrency {concurrency} needs a model behind an HTTP server (--model openai:BASE_URL#MODEL); "
            f"model {model!r} runs in this process and answers one question at a time"
        )


def _open_retriever(config: dict[str, Any], index_dir: Path, out: Path, progress: bool) -> Retriever:
    from dynrag.retrieval.factory import open_retriever, with_numpy_bm25

    name = config["retriever"]
    options = with_numpy_bm25(name, config["retriever_options"])
    return open_retriever(name, index_dir, options, work_dir=out, progress=progress)


def _answer_all(
    method: Method,
    todo: list[QAExample],
    done: list[dict[str, Any]],
    out: Path,
    scorer: Scorer,
    console: Console,
    progress: bool,
    total: int,
    concurrency: int = 1,
) -> None:
    """Answer `todo`, `concurrency` questions in flight at once. This thread alone writes
    predictions.jsonl, one fsynced line per finished question, in the order they finish."""
    records = list(done)
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
        for ex, answer, seconds in _answers(method, todo, concurrency):
            record = make_record(ex, answer.to_dict(), seconds, yes_no=False, scorer=scorer)
            writer.append(record)
            records.append(record)
            bar.update(task, advance=1, stats=_stats(records))


def _timed_answer(method: Method, ex: QAExample):
    started = time.perf_counter()
    answer = method.answer(ex.question)
    return ex, answer, time.perf_counter() - started


def _answers(method: Method, todo: list[QAExample], concurrency: int):
    """(example, answer, seconds) as each question finishes; at most `concurrency` in flight, so a
    crash loses at most that many answers (they are asked again on resume, and written once)."""
    if concurrency <= 1:
        for ex in todo:
            yield _timed_answer(method, ex)
        return
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    queue = iter(todo)
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="dynrag-eval") as pool:
        pending = {pool.submit(_timed_answer, method, ex) for ex in itertools.islice(queue, concurrency)}
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    yield future.result()
                    nxt = next(queue, None)
                    if nxt is not None:
                        pending.add(pool.submit(_timed_answer, method, nxt))
        finally:
            for future in pending:
                future.cancel()


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
