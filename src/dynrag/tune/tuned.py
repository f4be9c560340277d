"""A finished tune's best values, for commands that run a method at them (``reproduce --tuned``).

``tuned.json`` (written with best.yaml) holds the method, the options the tune fixed, the searched
values of its best trial and where they came from; ``read_tuned`` reads it back and
``applies_to`` says whether a run of some method and options is the kind of run the tune tuned.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dynrag.errors import ConfigError
from dynrag.io.files import atomic_write_json, read_json

TUNED_JSON = "tuned.json"


@dataclass(frozen=True)
class Tuned:
    source: str  # the tune's directory
    method: str
    fixed: dict[str, Any]  # the method options the tune held fixed (as given)
    options: dict[str, Any]  # the best trial's searched method options
    retriever_options: dict[str, Any]  # ... and its searched retriever options
    trial: int
    metric: str
    value: float

    def applies_to(self, method: str, options: dict[str, Any]) -> bool:
        """A run of ``method`` whose resolved options agree with every option the tune held fixed
        and with every choice-type option it ran at (a variant, a trigger rule: the kind of run)."""
        if method != self.method:
            return False
        from dynrag.methods.registry import METHODS, parse_options

        ours = parse_options(method, dict(options)).model_dump()
        theirs = parse_options(method, dict(self.fixed)).model_dump()
        fields = METHODS.get(method).options.model_fields
        kinds = [k for k, f in fields.items() if _is_choice(f.annotation) and k not in self.options]
        return all(ours[k] == theirs[k] for k in [*self.fixed, *kinds])

    def describe(self) -> str:
        values = ", ".join(f"{k}={v}" for k, v in {**self.options, **{f"retriever.{k}": v for k, v in
                                                                     self.retriever_options.items()}}.items())
        return f"{values} (from {self.source}, trial {self.trial}, {self.metric} {self.value:.4g})"


def _is_choice(annotation: Any) -> bool:
    import typing

    if typing.get_origin(annotation) is typing.Literal:
        return True
    return any(typing.get_origin(a) is typing.Literal for a in typing.get_args(annotation))  # Optional[Literal]


def write_tuned(out: Path, method: str, fixed: dict[str, Any], params: dict[str, Any], trial: int, metric: str,
                value: float) -> None:
    options = {k: v for k, v in params.items() if not k.startswith("retriever.")}
    retriever = {k.removeprefix("retriever."): v for k, v in params.items() if k.startswith("retriever.")}
    fixed = {k: v for k, v in fixed.items() if k not in options}
    atomic_write_json(Path(out) / TUNED_JSON, {"method": method, "fixed": fixed, "options": options,
                                               "retriever_options": retriever, "trial": trial, "metric": metric,
                                               "value": value})


def read_tuned(directory: Path) -> Tuned:
    path = Path(directory) / TUNED_JSON
    if not path.is_file():
        raise ConfigError(f"--tuned {directory}: not a finished tune ({TUNED_JSON} is missing; run `dynrag tune` "
                          "until a trial completes)")
    data = read_json(path, "tuned values")
    try:
        return Tuned(str(directory), data["method"], dict(data["fixed"]), dict(data["options"]),
                     dict(data["retriever_options"]), int(data["trial"]), str(data["metric"]), float(data["value"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"--tuned {directory}: {TUNED_JSON} is not a tune's record ({exc})") from None
