"""Which summary figures a tune can optimise, in which direction, and their values: from a run's
summary, or over the records answered so far (what a pruner sees)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from dynrag.errors import ConfigError
from dynrag.eval.summary import METRIC_KEYS

# Figures where less is better: tuned downwards.
COSTS = ("retrievals_per_question", "generated_tokens_per_question", "seconds_per_question", "decoded_per_kept",
         "retrievals_when_correct", "retrievals_when_incorrect")
METRICS = tuple(k for k in METRIC_KEYS if k != "n") + ("retrievals_when_correct", "retrievals_when_incorrect",
                                                        "decoded_per_kept")


def direction(metric: str) -> str:
    return "minimize" if metric in COSTS else "maximize"


def check_metric(flag: str, name: str | None) -> None:
    if name is not None and name not in METRICS:
        raise ConfigError(f"{flag} {name}: not a figure of a run's summary; choose one of: {', '.join(METRICS)}")


def figure_of(summary: dict[str, Any], name: str, run_dir: Path) -> float:
    value = summary.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"--metric/--also {name}: {run_dir}/summary.json has no figure {name!r} "
                          f"(it has {', '.join(numeric_keys(summary))})")
    return float(value)


def numeric_keys(summary: dict[str, Any]) -> list[str]:
    return [k for k, v in summary.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]


def running_figure(dataset: str, scorer_name: str, metric: str) -> Callable[[list[dict[str, Any]]], float | None]:
    """The metric over the records answered so far, scored as the run's summary scores them."""
    from dynrag.datasets.loaders import dataset_spec
    from dynrag.datasets.metrics import open_scorer
    from dynrag.eval.summary import summarize

    spec = dataset_spec(dataset)
    scorer = open_scorer(scorer_name, spec)

    def figure(records: list[dict[str, Any]]) -> float | None:
        value = summarize(records, any(r.get("support") for r in records), spec.yes_no, None, scorer, spec).get(metric)
        return float(value) if isinstance(value, (int, float)) else None

    return figure
