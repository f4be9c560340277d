"""`dynrag tune`: search a method's options on dev questions with Optuna, resumably.

Every check runs before anything is written: the space against the method's (and retriever's)
options, the metric, the trial count, the base run's plan, the storage. Then the study is opened
(or checked against what it was created for), trials a dead process left are enqueued again, and
Optuna's optimize loop runs trials until the study holds ``--trials`` of them (complete or
pruned), whichever processes ran them. ``tune.json`` under ``--out`` records the settings, so
``dynrag tune --out DIR --report`` needs nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field
from rich.console import Console
from rich.text import Text

from dynrag.config import RunConfig
from dynrag.errors import ConfigError
from dynrag.eval.worker import MethodFactory
from dynrag.io.directories import check_out_dir
from dynrag.io.files import atomic_write_json, read_json
from dynrag.registry import Options
from dynrag.run.jobs import JOBS, JobTraits, OutputGroup
from dynrag.tune.figures import check_metric, direction, running_figure
from dynrag.tune.objective import COUNTED, Objective, OverBudget, trials_in
from dynrag.tune.space import Param, check_names, grid_space, parse_param
from dynrag.tune.study import (
    STUDY_DB, Pruner, Sampler, make_pruner, make_sampler, open_storage, open_study, recover, retry, shown_url,
    storage_url,
)

TUNE_JSON = "tune.json"
TUNE_FORMAT = "dynrag-tune/1"
class TuneSettings(Options):
    """What a tune searches and how (tune.json holds them)."""

    format: str = TUNE_FORMAT
    run: dict[str, Any]  # the base run configuration (RunConfig keys), without out
    space: list[str] = Field(min_length=1)
    trials: int
    metric: str = "em"
    also: str | None = None
    sampler: Sampler = "tpe"
    seed: int | None = None
    storage: str | None = None  # None: SQLite under out
    study: str | None = None  # None: out's name
    prune: Pruner = "none"
    prune_every: int = Field(10, ge=1)
    prune_startup: int = Field(2, ge=0)


def read_settings(out: Path) -> TuneSettings:
    path = Path(out) / TUNE_JSON
    if not path.is_file():
        raise ConfigError(f"--out {out}: holds no tune ({TUNE_JSON} is missing); run `dynrag tune` with a --space first")
    return TuneSettings.model_validate(read_json(path, "tune settings"))


def check_out(out: Path) -> None:
    # a first run stopped before tune.json left its study.db: still ours
    check_out_dir(out, lambda d: (d / TUNE_JSON).exists() or (d / STUDY_DB).exists(), "tune directory",
                  where=f"--out {out}")


def plan_tune(settings: TuneSettings, base: RunConfig,
              fixed: Mapping[str, str] | None = None) -> tuple[list[Param], dict[str, Any]]:
    """The parsed space and the study's identity; every check of the inputs runs here. ``fixed``:
    the option keys (``options.theta``, ``retriever_options.alpha``) a flag fixed, to the flag."""
    from dynrag.eval.runner import eval_config
    from dynrag.methods.registry import METHODS
    from dynrag.retrieval.factory import RETRIEVERS
    from dynrag.run.plan import make_plan
    from dynrag.datasets.loaders import dataset_spec

    if settings.trials < 1:
        raise ConfigError(f"--trials {settings.trials}: a tune runs at least 1 trial")
    check_metric("--metric", settings.metric)
    check_metric("--also", settings.also)
    plan = make_plan(base.model_copy(update={"out": Path("/nonexistent/dynrag-tune-check")}), command="eval")
    assert plan.method is not None and plan.dataset is not None
    if settings.metric == "accuracy" and not dataset_spec(plan.dataset.name).yes_no:
        raise ConfigError(f"--metric accuracy: {plan.dataset.name} is not a yes/no dataset; its summary has no accuracy")
    retriever = plan.retriever.name if plan.retriever else None
    params = [parse_param(s, METHODS.get(plan.method.name).options,
                          RETRIEVERS.get(retriever).options if retriever else None, plan.method.name, retriever)
              for s in settings.space]
    check_names(params)
    for p in params:
        flag = (fixed or {}).get(f"{p.section}.{p.name}")
        if flag:  # a trial's value would silently replace the fixed one
            searched = p.spec.partition("=")[0].strip()  # as the user wrote it
            raise ConfigError(f"{flag} {p.name}: also searched by --space {searched} (give it one or the other)")
    grid = grid_space(params) if settings.sampler == "grid" else None
    run = eval_config(plan)
    for path_key in ("data", "aliases", "corpus"):  # paths differ between machines; checksums identify
        if run.get(f"{path_key}_sha256"):
            run.pop(path_key, None)
    identity = {"space": [p.describe() for p in params], "metric": settings.metric, "also": settings.also,
                "run": run, "grid": grid, "format": TUNE_FORMAT}
    return params, identity


def trial_budget(trials: int, grid: dict[str, list[Any]] | None) -> int:
    """--trials, or the grid's size when it has fewer points (a grid point is never run twice)."""
    size = 1
    for values in (grid or {}).values():
        size *= len(values)
    return min(trials, size) if grid else trials


def run_tune(settings: TuneSettings, out: Path, *, workers: int | str | None = None, batch: int | None = None,
             method_factory: MethodFactory | None = None, console: Console | None = None,
             fixed: Mapping[str, str] | None = None, progress: bool = False) -> dict[str, Any]:
    """Run (or go on with) the tune; returns what ``report.study_report`` makes of the study.
    ``fixed`` as plan_tune's; ``progress``: each trial's eval shows its progress bar."""
    from dynrag.tune.report import write_outputs

    console = console or Console(stderr=True, emoji=False)
    out = Path(out)
    check_out(out)
    base = RunConfig(**settings.run, workers=workers, batch=batch)
    params, identity = plan_tune(settings, base, fixed)
    budget = trial_budget(settings.trials, identity["grid"])
    if budget < settings.trials:
        console.print(Text(f"the grid has {budget} points: {budget} trials, not {settings.trials}"), soft_wrap=True)
    if settings.storage is None:
        out.mkdir(parents=True, exist_ok=True)  # the SQLite file's directory
    storage = open_storage(storage_url(settings.storage, out))  # an unreachable server fails before out is made
    out.mkdir(parents=True, exist_ok=True)
    try:
        # the flag that named the study is the one to change for another
        where, fresh = (f"--study {settings.study}", "--study") if settings.study else (f"--out {out}", "--out")
        study = open_study(storage, settings.study or out.resolve().name, identity, direction(settings.metric),
                           make_sampler(settings.sampler, settings.seed, identity["grid"]),
                           make_pruner(settings.prune, settings.prune_every, settings.prune_startup),
                           where=where, fresh=fresh)
        saved = settings.model_copy(update={"storage": shown_url(settings.storage) if settings.storage else None})
        atomic_write_json(out / TUNE_JSON, saved.model_dump(mode="json"))
        again = recover(study)
        if again:
            console.print(Text(f"trial(s) {', '.join(map(str, again))} of a process that is gone: enqueued again"),
                          soft_wrap=True)
        objective = Objective(base, params, out, settings.metric, settings.also, budget,
                              settings.prune_every if settings.prune != "none" else None, method_factory, console,
                              running_figure(base.dataset, base.scorer, settings.metric), progress)
        if _left(study, budget):
            _optimize(study, objective, budget)
        return write_outputs(study, settings, params, out, budget, console)
    finally:
        storage.remove_session()
        storage.engine.dispose()


def _left(study, budget: int) -> bool:
    """Whether this process has a trial to run: a retried one waits, or the budget is not taken."""
    if trials_in(study, "WAITING"):
        return True
    return len(trials_in(study, *COUNTED, "RUNNING")) < budget


def _optimize(study, objective: Objective, budget: int) -> None:
    import os

    def stop_when_full(study, _trial) -> None:
        if not _left(study, budget):
            study.stop()

    try:
        study.optimize(objective, callbacks=[stop_when_full], gc_after_trial=False)
    except OverBudget:
        return
    except KeyboardInterrupt:
        # Optuna failed the interrupted trial; enqueue it again so the next run resumes its directory.
        for trial in trials_in(study, "FAIL"):
            owner = trial.user_attrs.get("owner") or {}
            if owner.get("pid") == os.getpid() and owner.get("trial") == trial.number and not _retried(study, trial.number):
                retry(study, trial)
        raise


def _retried(study, number: int) -> bool:
    return any(number in (t.system_attrs.get("retry_history") or []) for t in study.get_trials(deepcopy=False))


__all__ = ["TuneSettings", "read_settings", "run_tune", "TUNE_JSON"]


class TuneJobOptions(OutputGroup):
    """The `tune` job's options: what the study searches (``settings``, saved as tune.json) and how
    each trial runs, which is not part of the study's identity."""

    settings: TuneSettings
    workers: int | str | None = None
    batch: int | None = None
    fixed: dict[str, str] | None = None  # the options held fixed by flags, as plan_tune reads them
    progress: bool = False  # each trial's eval shows its progress bar


def tune_job(options: TuneJobOptions, *, console: Console | None = None,
             method_factory: MethodFactory | None = None) -> dict[str, Any]:
    return run_tune(options.settings, options.out, workers=options.workers, batch=options.batch,
                    method_factory=method_factory, console=console, fixed=options.fixed, progress=options.progress)


# The study may be shared by several processes (a PostgreSQL storage), so the job holds no lock of
# its own; each trial is an eval run that holds its directory.
JOBS.add("tune", tune_job, TuneJobOptions, summary="a method's options searched on dev questions, one eval run a trial",
         traits=JobTraits(lock="none", loop="eval"))
