"""The `tune` command; dynrag.cli registers it through ``register``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, ContextManager, Optional

import typer
from rich.console import Console

from dynrag.methods.registry import method_traits
from dynrag.run.flags import (
    batch_flag, config_flag, corpus_flag, data_flag, dataset_flag, exemplars_flag, limit_flag, method_flag,
    method_option_flag, model_flag, progress_flag, retriever_flag, retriever_option_flag, skip_bad_flag, workers_flag,
)

UserErrors = Callable[[], ContextManager[None]]
RUN_KEYS_NOT_SAVED = {"out", "workers", "batch", "dask", "concurrency"}  # not what a trial answers


def register(app: typer.Typer, user_errors: UserErrors) -> None:
    @app.command("tune")
    def tune_command(
        out: Path = typer.Option(..., "--out", metavar="DIR", help="The tune's directory: study.db, trials/N, best.yaml, report.md (resumed when it exists)."),
        # Not typer-required: `tune --out DIR --report` alone reads the study and needs neither.
        space: list[str] = typer.Option([], "--space", metavar="NAME=SPEC", help="Required: a searched option: LO:HI, LO:HI:log, LO:HI:STEP or A,B,C (repeatable; not needed with --out DIR --report alone)."),
        trials: Optional[int] = typer.Option(None, "--trials", metavar="N", help="Required: trials in the study, complete or pruned, whichever process runs them (not needed with --out DIR --report alone)."),
        metric: str = typer.Option("em", "--metric", metavar="KEY", help="The summary figure to optimise (em, f1, ...; costs such as retrievals_per_question are minimised)."),
        also: Optional[str] = typer.Option(None, "--also", metavar="KEY", help="A second summary figure recorded per trial; the report shows the Pareto front."),
        sampler: str = typer.Option("tpe", "--sampler", metavar="tpe|grid|random", help="Optuna's sampler (grid: every point of lists and stepped ranges)."),
        seed: Optional[int] = typer.Option(None, "--seed", metavar="N", help="The sampler's seed."),
        storage: Optional[str] = typer.Option(None, "--storage", metavar="URL", help="Study storage: default sqlite under --out; postgresql://USER@HOST:PORT/DB lets several processes or machines share one study."),
        study: Optional[str] = typer.Option(None, "--study", metavar="NAME", help="The study's name in the storage (default: the --out directory's name)."),
        prune: str = typer.Option("none", "--prune", metavar="none|median|halving", help="Stop trials whose running metric falls behind (Optuna's median or successive-halving pruner)."),
        prune_every: int = typer.Option(10, "--prune-every", metavar="K", help="Report the running metric to the pruner after every K questions."),
        prune_startup: int = typer.Option(2, "--prune-startup", metavar="N", help="median: trials that run in full before any is pruned."),
        report: bool = typer.Option(False, "--report", help="Print the report (trials table, best values, edge notes); alone with --out, only report."),
        config: Optional[Path] = config_flag(role="Run configuration, the base of every trial"),
        dataset: Optional[str] = dataset_flag(),
        data: Optional[Path] = data_flag(role="Dev questions"),
        method: Optional[str] = method_flag(),
        corpus: Optional[str] = corpus_flag(),
        limit: Optional[int] = limit_flag(),
        skip_bad: Optional[bool] = skip_bad_flag(None),
        model: Optional[str] = model_flag(),
        option: list[str] = method_option_flag(role="A fixed method option"),
        retriever: Optional[str] = retriever_flag(),
        retriever_option: list[str] = retriever_option_flag(role="A fixed retriever option"),
        exemplars: Optional[str] = exemplars_flag(),
        scorer: Optional[str] = typer.Option(None, "--scorer", metavar="NAME", help="squad (default) | dragin."),
        workers: Optional[str] = workers_flag(role="Each trial's eval worker processes"),
        batch: Optional[int] = batch_flag(role="Each trial's batch"),
        progress: bool = progress_flag(),
    ) -> None:
        """Tune a method's options on dev questions: each trial an eval run, resumable, one study
        on one machine or many."""
        with user_errors():
            from dynrag.config import load_run_config
            from dynrag.errors import ConfigError
            from dynrag.run.plan import DEFAULT_METHOD
            from dynrag.run.jobs import JOBS
            from dynrag.tune.run import TuneJobOptions, TuneSettings

            err = Console(stderr=True, emoji=False)
            given = dict(dataset=dataset, data=data, method=method, corpus=corpus, limit=limit, model=model,
                         retriever=retriever, exemplars=exemplars, scorer=scorer, skip_bad=skip_bad)
            if report and not space and config is None and all(v is None for v in given.values()):
                result = _report_only(out, storage, err)
            else:
                if trials is None and space:
                    raise ConfigError("--trials is required: how many trials the study runs")
                run = load_run_config(config, {**given, "workers": workers, "batch": batch}, list(option),
                                      list(retriever_option))
                # A method may declare what to search when no --space is given (seakr: its threshold).
                space = list(space) or list(method_traits(run.method or DEFAULT_METHOD).tune_space)
                if not space:
                    raise ConfigError("--space is required: NAME=LO:HI, NAME=LO:HI:log, NAME=LO:HI:STEP or NAME=A,B,C")
                if trials is None:
                    raise ConfigError("--trials is required: how many trials the study runs")
                saved = run.model_dump(mode="json", exclude_defaults=True, exclude=RUN_KEYS_NOT_SAVED)
                settings = TuneSettings(run=saved, space=list(space), trials=trials, metric=metric, also=also,
                                        sampler=_choice("--sampler", sampler, ("tpe", "grid", "random")), seed=seed,
                                        storage=storage, study=study,
                                        prune=_choice("--prune", prune, ("none", "median", "halving")),
                                        prune_every=_positive("--prune-every", prune_every),
                                        prune_startup=max(0, prune_startup))
                fixed = run.given_by("--option", "--retriever-option")
                result = JOBS.open("tune", TuneJobOptions(out=out, settings=settings, workers=run.workers, batch=run.batch,
                                                          fixed=fixed, progress=progress and err.is_terminal),
                                   console=err)
            if report:
                sys.stdout.write(result["markdown"])
            elif result["best"] is not None:
                best = result["best"]
                shown = ", ".join(f"{k}={v}" for k, v in best["params"].items())
                sys.stdout.write(f"best: trial {best['number']}, {metric} {best['value']:.4g} at {shown}\n")


def _report_only(out: Path, storage: Optional[str], err: Console) -> dict:
    from dynrag.config import RunConfig
    from dynrag.errors import ConfigError
    from dynrag.tune.report import write_outputs
    from dynrag.tune.run import plan_tune, read_settings, trial_budget
    from dynrag.tune.study import open_storage, shown_url, storage_url

    settings = read_settings(out)
    url = storage or settings.storage
    if storage is None and url and "***" in url:
        raise ConfigError(f"--storage: the tune's storage {url} hides its password; give --storage URL")
    params, identity = plan_tune(settings, RunConfig(**settings.run))
    opened = open_storage(storage_url(url, out))
    try:
        import optuna

        try:
            study = optuna.load_study(study_name=settings.study or Path(out).resolve().name, storage=opened)
        except KeyError:
            raise ConfigError(f"--out {out}: its study is not in {shown_url(storage_url(url, out))}") from None
        return write_outputs(study, settings, params, Path(out), trial_budget(settings.trials, identity["grid"]), err)
    finally:
        opened.remove_session()
        opened.engine.dispose()


def _choice(flag: str, value: str, choices: tuple[str, ...]) -> str:
    from dynrag.errors import ConfigError

    if value not in choices:
        raise ConfigError(f"{flag} {value}: choose one of: {', '.join(choices)}")
    return value


def _positive(flag: str, value: int) -> int:
    from dynrag.errors import ConfigError

    if value < 1:
        raise ConfigError(f"{flag} {value}: must be at least 1")
    return value
