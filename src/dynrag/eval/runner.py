"""`dynrag eval`: answer a benchmark's questions with one method into a resumable run directory.

The model and the index are loaded once per run; each finished question is one fsynced line of
predictions.jsonl; re-running the same command skips finished ids; summary.json/summary.md are
recomputed from predictions.jsonl at the end of every run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from rich.console import Console
from rich.text import Text
from rich.progress import Progress

from dynrag.errors import ConfigError
from dynrag.io.files import atomic_write_json, atomic_write_text
from dynrag.lm.spec import ModelSpec
from dynrag.progress import bar_columns
from dynrag.datasets.boundary import knowledge_boundary
from dynrag.eval.execution import Executor, make_executor
from dynrag.eval.worker import MethodFactory, WorkerJob
from dynrag.datasets.formats import Dataset
from dynrag.datasets.loaders import LoadReport, QAExample, dataset_spec, load_aliases
from dynrag.datasets.metrics import Scorer, open_scorer
from dynrag.eval.steps import load_questions, run_index
from dynrag.eval.timing import SessionClock, read_sessions, wall_figures
from dynrag.io.rundir import (
    SUMMARY_JSON,
    SUMMARY_MD,
    EVAL_RUN_FORMAT,
    PredictionWriter,
    lock_run,
    open_run,
    read_eval_config,
    read_predictions,
    resume_records,
    unique_by_id,
    write_run_yaml,
)
from dynrag.eval.summary import make_record, summarize, summary_markdown
from dynrag.methods.base import Method
from dynrag.retrieval.base import Retriever
from dynrag.config import RunConfig
from dynrag.run.jobs import JOBS, JobTraits
from dynrag.run.plan import RunPlan, make_plan

RUN_FORMAT = EVAL_RUN_FORMAT
RecordHook = Callable[[list[dict[str, Any]]], None]


def eval_config(plan: RunPlan) -> dict[str, Any]:
    """config.json: every input that decides the answers, resolved (defaults filled in). Its keys
    and their order are the run directory's format: old runs resume only while they stay."""
    method, retriever, data = plan.method, plan.retriever, plan.dataset
    if method is None or data is None:
        raise ValueError("an eval plan names a method and a dataset")
    return {
        "format": RUN_FORMAT,
        "method": method.name,
        "options": method.options.model_dump(),
        "model": str(plan.model.resolved()),
        "dataset": data.name,
        "data": str(data.data),
        "data_sha256": data.data_sha256,
        "aliases": str(data.aliases) if data.aliases else None,
        "aliases_sha256": data.aliases_sha256,
        "corpus": retriever.corpus if retriever else None,
        "corpus_sha256": retriever.corpus_sha256 if retriever else None,
        "retriever": retriever.name if retriever else None,
        "retriever_options": retriever.options if retriever else None,
        "limit": data.limit,
        "exemplars": plan.exemplars,
        "scorer": plan.scorer,
        # only when given, so that config.json of every earlier run still compares equal
        **({"shard": data.shard} if data.shard else {}),
    }


def run_yaml(config: dict[str, Any], plan: RunPlan) -> dict[str, Any]:
    """The run as ``dynrag.config.RunConfig`` keys, resolved: what config.yaml holds."""
    keys = ("method", "options", "model", "exemplars", "retriever", "retriever_options", "corpus",
            "dataset", "data", "limit", "shard", "aliases")
    run = {key: config.get(key) for key in keys}
    run["retriever_options"] = run["retriever_options"] or {}
    skip_bad = plan.dataset.skip_bad if plan.dataset else False
    run.update(skip_bad=skip_bad, baseline=str(Path(plan.baseline).resolve()) if plan.baseline else None,
               out=str(Path(plan.out).resolve()) if plan.out else None)
    return {key: value for key, value in run.items() if value is not None}


def default_method_factory(config: dict[str, Any], retriever: Retriever | None) -> Method:
    from dynrag.run.assemble import method_from_saved

    return method_from_saved(config, retriever)


def _stats(records: list[dict[str, Any]]) -> str:
    if not records:
        return "EM –  F1 –"
    n = len(records)
    em = sum(r["em"] for r in records) / n
    f1 = sum(r["f1"] for r in records) / n
    ret = sum(r["retrievals"] for r in records) / n
    return f"EM {100 * em:5.1f}  F1 {100 * f1:5.1f}  ret/q {ret:.2f}"


def run_eval(
    plan: RunPlan,
    *,
    method_factory: MethodFactory | None = None,
    console: Console | None = None,
    progress: bool = True,
    on_record: RecordHook | None = None,
) -> dict[str, Any]:
    """Run (or resume) the evaluation ``plan`` describes (``make_plan(config, command="eval")``);
    returns the summary written to summary.json. ``on_record`` is called with every record so far
    after each new one is written (`dynrag tune` prunes there: an exception it raises ends the run
    with what was written kept, and no summary)."""
    console = console or Console(stderr=True, emoji=False)
    clock = SessionClock(Path(plan.out))  # from here: loading the model and the index count as the run's time
    config = eval_config(plan)
    data, execution, out = plan.dataset, plan.execution, Path(plan.out)
    scorer = open_scorer(plan.scorer, dataset_spec(data.name))
    check_concurrency(execution.concurrency, plan.model, custom_method=method_factory is not None)
    check_batch(execution.batch, plan.model, custom_method=method_factory is not None)
    aliases = load_aliases(data.aliases) if data.aliases else None
    examples, report = load_questions(
        data.name, data.given, console, aliases=aliases, skip_bad=data.skip_bad, limit=data.limit
    )
    # The pooled contexts are every question's, so that a shard searches what the whole row searches.
    pooled_from = examples
    if data.shard:
        from dynrag.datasets.shard import Shard

        examples = Shard.parse(data.shard).pick(examples)
        if not examples:
            raise ConfigError(f"--shard {data.shard}: no questions in this shard of {len(pooled_from)}")
        console.print(Text(f"shard {data.shard}: {len(examples)} of {len(pooled_from)} questions"), soft_wrap=True)

    from dynrag.methods.budget import check_question
    from dynrag.methods.registry import parse_options

    # Everything that can be checked is checked before the run directory is touched.
    for ex in examples:
        check_question(ex.question, where=f"{data.given}: question {ex.id!r}")
    if plan.baseline is not None:
        check_baseline(Path(plan.baseline), config, examples)
    # The lock is held from before predictions.jsonl is read until the summary is written: a
    # second process on this directory fails here, at once, naming this one's pid.
    with lock_run(out):
        note = open_run(out, config, option_defaults=parse_options(config["method"], {}).model_dump())
        if note:
            console.print(Text(note), soft_wrap=True)
        write_run_yaml(out, run_yaml(config, plan))
        resumed = resume_records(out, [ex.id for ex in examples])
        for line in resumed.messages(out, len(examples)):
            console.print(Text(line), soft_wrap=True)
        done = resumed.done
        done_ids = {r["id"] for r in done}
        todo = [ex for ex in examples if ex.id not in done_ids]

        if todo:
            index_dir = None
            if plan.retriever is not None and plan.retriever.corpus:  # not a search server
                index_dir = run_index(plan.retriever.index, out, pooled_from, console, progress)
            job = WorkerJob(config, str(index_dir) if index_dir else None, str(out),
                            method_factory or default_method_factory)
            executor = make_executor(job, workers=execution.workers, dask=execution.dask,
                                     concurrency=execution.concurrency, todo=len(todo), progress=progress,
                                     batch=execution.batch)
            console.print(Text(f"method {config['method']}, model {config['model']}: {len(todo)} questions to answer"
                               f" ({executor.description})"), soft_wrap=True)
            clock.execution = executor.description
            _answer_all(executor, todo, done, out, scorer, console, progress, len(examples), dataset_spec(data.name),
                        on_record, clock)

        return write_summary(out, config, examples, report, baseline=plan.baseline, scorer=scorer, yes_no=data.yes_no)


def check_concurrency(concurrency: int, model: ModelSpec, custom_method: bool = False) -> None:
    if concurrency > 1 and not custom_method and not model.is_http:
        raise ConfigError(
            f"--concurrency {concurrency} needs a model behind an HTTP server (--model openai:BASE_URL#MODEL); "
            f"model {str(model)!r} runs in this process and answers one question at a time"
        )


def check_batch(batch: int, model: ModelSpec, custom_method: bool = False) -> None:
    if batch <= 1:
        return
    if custom_method:
        raise ConfigError(f"--batch {batch} builds the run's own method over a batching model; "
                          "a caller-made method factory cannot use it (use --workers)")
    if not model.is_local:
        raise ConfigError(f"--batch {batch} needs a model that runs in this process (bundled or hf:); model "
                          f"{str(model)!r} is behind a server: use --concurrency {batch} instead")


def _answer_all(
    executor: Executor,
    todo: list[QAExample],
    done: list[dict[str, Any]],
    out: Path,
    scorer: Scorer,
    console: Console,
    progress: bool,
    total: int,
    dataset: Dataset,
    on_record: RecordHook | None = None,
    clock: SessionClock | None = None,
) -> None:
    """Answer ``todo`` with ``executor``; this loop alone appends to predictions.jsonl, one fsynced
    line per question as each finishes (in finishing order), so each is written exactly once."""
    records = list(done)
    by_id = {ex.id: ex for ex in todo}
    written: set[str] = set()
    with PredictionWriter(out) as writer, Progress(*bar_columns("questions"), console=console, disable=not progress) as bar:
        task = bar.add_task("eval", total=total, completed=len(done), stats=_stats(records))
        for outcome in executor.answers([(ex.id, ex.question) for ex in todo]):
            if outcome.id in written or outcome.id not in by_id:
                continue  # a question answered twice (a retried worker's late reply): keep the first
            written.add(outcome.id)
            record = make_record(by_id[outcome.id], outcome.answer, outcome.seconds, yes_no=False, scorer=scorer,
                                 dataset=dataset)
            writer.append(record)
            if clock is not None:
                clock.tick()
            records.append(record)
            bar.update(task, advance=1, stats=_stats(records))
            if on_record is not None:
                on_record(records)


def write_summary(
    out: Path,
    config: dict[str, Any],
    examples: list[QAExample],
    report: LoadReport | None = None,
    baseline: Path | None = None,
    scorer: Scorer | None = None,
    yes_no: bool | None = None,
) -> dict[str, Any]:
    """Recompute summary.json and summary.md from predictions.jsonl (only ids of this dataset);
    ``scorer`` and ``yes_no`` default to what the config's dataset and scorer say."""
    ids = {ex.id for ex in examples}
    predictions = [p for p in unique_by_id(read_predictions(out))[0] if p["id"] in ids]
    meta: dict[str, Any] = {"method": config["method"], "model": config["model"], "dataset": config["dataset"]}
    if config.get("shard"):
        meta["shard"] = config["shard"]
    if report is not None and report.skipped:
        meta["skipped_records"] = report.skipped
    if report is not None and report.excluded:
        meta["excluded_records"] = sum(report.excluded.values())
    has_support = any(ex.supporting for ex in examples)
    meta["scorer"] = config.get("scorer", "squad")
    dataset = dataset_spec(config["dataset"])
    if yes_no is None:
        yes_no = dataset.yes_no
    summary = summarize(predictions, has_support, yes_no, meta, scorer or run_scorer(config), dataset)
    summary.update(wall_figures(read_sessions(out), len(predictions)))
    if baseline is not None:
        summary["knowledge_boundary"] = baseline_figures(predictions, Path(baseline), config)
    atomic_write_json(out / SUMMARY_JSON, summary)
    atomic_write_text(out / SUMMARY_MD, summary_markdown(summary))
    return summary


def run_scorer(config: dict[str, Any]) -> Scorer:
    """The scorer a run's config names (runs made before scorers were a choice: squad)."""
    return open_scorer(config.get("scorer", "squad"), dataset_spec(config["dataset"]))


def check_baseline(baseline: Path, config: dict[str, Any], examples: list[QAExample] | None = None) -> dict[str, Any]:
    """``--baseline``: a no-retrieval eval run of the same base model on the same data, sharing
    questions with this one (what the model knows on its own); its config."""
    from dynrag.lm.lineage import base_model

    base_config = read_eval_config(baseline, f"--baseline {baseline}")
    for key in ("dataset", "data_sha256"):
        if base_config.get(key) != config.get(key):
            raise ConfigError(f"--baseline {baseline}: a run on different data ({key} differs)")
    ours, theirs = base_model(str(config.get("model"))), base_model(str(base_config.get("model")))
    if ours != theirs:
        trained = f" (trained from {ours})" if ours != config.get("model") else ""
        raise ConfigError(f"--baseline {baseline}: made with model {base_config.get('model')!r}, but this run's model "
                          f"{config.get('model')!r}{trained} has another base; the baseline must be the same base "
                          "model answering without retrieval")
    predictions = read_predictions(baseline)
    retrieved = sum(1 for r in predictions if r.get("retrievals"))
    if retrieved:
        raise ConfigError(f"--baseline {baseline}: its {base_config.get('method')!r} run retrieved on {retrieved} of "
                          f"{len(predictions)} questions; the baseline must never retrieve (a `direct` run)")
    if examples is not None:
        ids = {ex.id for ex in examples}
        if not any(r["id"] in ids for r in predictions):
            raise ConfigError(f"--baseline {baseline}: has answered none of these questions")
    return base_config


def baseline_figures(predictions: list[dict[str, Any]], baseline: Path, config: dict[str, Any]) -> dict[str, Any]:
    base_config = check_baseline(baseline, config)
    base = unique_by_id(read_predictions(baseline))[0]
    figures = knowledge_boundary(predictions, base)
    if figures["n"] == 0:
        raise ConfigError(f"--baseline {baseline}: shares no answered questions with this run")
    return {"baseline": str(baseline), "baseline_method": base_config.get("method"), **figures}


def eval_job(config: RunConfig, *, console: Console | None = None, progress: bool = True) -> dict[str, Any]:
    """The `eval` job: its run configuration planned (every check), then answered in the resumable loop."""
    return run_eval(make_plan(config, command="eval"), console=console, progress=progress)


JOBS.add("eval", eval_job, RunConfig, summary="a method on a benchmark file into a resumable run directory",
         traits=JobTraits(lock="out", loop="eval"))
