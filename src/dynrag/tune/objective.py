"""One trial of a tune: an ordinary eval run under ``OUT/trials/N`` with the trial's values.

The trial's figure is the chosen metric of the run's summary; with a pruner, the metric over the
questions answered so far is reported every k questions, and a trial the pruner stops ends there
(its predictions kept). A retried trial (its process died, or was interrupted) runs in the run
directory of the trial it repeats, so eval resumes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from rich.console import Console
from rich.text import Text

from dynrag.config import RunConfig
from dynrag.eval.worker import MethodFactory
from dynrag.tune.figures import figure_of
from dynrag.tune.space import Param, key
from dynrag.tune.study import owner_attr, root_number

if TYPE_CHECKING:
    import optuna

TRIALS = "trials"
COUNTED = ("COMPLETE", "PRUNED")  # the states a trial counts in --trials


class OverBudget(Exception):
    """The study already holds its trials (another process took the last one): this one does not run."""


def trial_dir(out: Path, number: int) -> Path:
    return Path(out) / TRIALS / str(number)


def trial_config(base: RunConfig, params: list[Param], values: dict[str, Any], out: Path) -> RunConfig:
    """The run configuration of one trial: the base with the trial's values over its options."""
    options, retriever_options = dict(base.options), dict(base.retriever_options)
    for p in params:
        (options if p.section == "options" else retriever_options)[p.name] = values[key(p)]
    config = base.model_copy(update={"options": options, "retriever_options": retriever_options, "out": out})
    config._origin, config._source = {**base._origin, "options": "--space", "retriever_options": "--space"}, None
    return config


def suggest(trial: "optuna.Trial", params: list[Param]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for p in params:
        name = key(p)
        if p.kind == "list":
            values[name] = trial.suggest_categorical(name, list(p.choices))
        elif p.kind == "int":
            values[name] = trial.suggest_int(name, int(p.low), int(p.high), step=int(p.step or 1), log=p.log)
        else:
            values[name] = trial.suggest_float(name, p.low, p.high, step=p.step, log=p.log)
    return values


def trials_in(study: "optuna.Study", *states: str) -> list["optuna.trial.FrozenTrial"]:
    from optuna.trial import TrialState

    return study.get_trials(deepcopy=False, states=tuple(TrialState[s] for s in states))


def over_budget(study: "optuna.Study", number: int, budget: int) -> bool:
    """Whether trial ``number`` is beyond the study's ``budget``: more than that many trials that
    count, run or wait, up to and including it (two processes may ask for the last one at once)."""
    taken = [t for t in trials_in(study, *COUNTED, "RUNNING", "WAITING") if t.number <= number]
    return len(taken) > budget


@dataclass
class Objective:
    """The function Optuna's optimize loop calls with each trial."""

    base: RunConfig
    params: list[Param]
    out: Path
    metric: str
    also: str | None
    budget: int
    prune_every: int | None  # None: no pruning
    method_factory: MethodFactory | None = None
    console: Console = field(default_factory=lambda: Console(stderr=True, emoji=False))
    running_figure: Callable[[list[dict[str, Any]]], float | None] | None = None
    progress: bool = False  # each trial's eval shows its progress bar

    def __call__(self, trial: "optuna.Trial") -> float:
        import optuna

        study = trial.study
        frozen = study._storage.get_trial(trial._trial_id)  # the system attributes a retry carries
        if over_budget(study, trial.number, self.budget):
            trial.set_user_attr("skipped", f"the study already had its {self.budget} trials")
            study.stop()
            raise OverBudget()
        root = root_number(frozen)
        run_dir = trial_dir(self.out, root)
        trial.set_user_attr("owner", owner_attr(trial.number))
        trial.set_user_attr("run_dir", f"{TRIALS}/{root}")
        values = suggest(trial, self.params)
        from dynrag.eval.runner import run_eval
        from dynrag.run.plan import make_plan

        plan = make_plan(trial_config(self.base, self.params, values, run_dir), command="eval")
        shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items())
        again = f" (resumes trial {root})" if root != trial.number else ""
        self.console.print(Text(f"trial {trial.number}{again}: {shown} -> {run_dir}"), soft_wrap=True)

        def on_record(records: list[dict[str, Any]]) -> None:
            if self.prune_every is None or self.running_figure is None or len(records) % self.prune_every:
                return
            figure = self.running_figure(records)
            if figure is None:
                return
            trial.report(figure, len(records))
            if trial.should_prune():
                trial.set_user_attr("answered", len(records))
                self.console.print(Text(f"trial {trial.number}: pruned after {len(records)} questions "
                                        f"({self.metric} so far {figure:.4g})"), soft_wrap=True)
                raise optuna.TrialPruned(f"{self.metric} {figure:.4g} after {len(records)} questions")

        summary = run_eval(plan, method_factory=self.method_factory, console=self.console, progress=self.progress,
                           on_record=on_record)
        trial.set_user_attr("answered", summary.get("n"))
        value = figure_of(summary, self.metric, run_dir)
        if self.also is not None:
            trial.set_user_attr("also", figure_of(summary, self.also, run_dir))
        self.console.print(Text(f"trial {trial.number}: {self.metric} {value:.4g}"), soft_wrap=True)
        return value
