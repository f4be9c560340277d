"""One run's configuration: a YAML file (``--config run.yaml``) and command-line flags over it.

``dynrag ask``, ``dynrag serve``, ``dynrag eval`` and ``dynrag eval-retrieval`` read the same
``RunConfig``; each uses the keys it needs (a file can hold them all). A flag given on the command
line wins over the file's value; ``--option`` / ``--retriever-option`` pairs are merged into the
file's ``options`` / ``retriever_options`` key by key. Every key is validated: an unknown or bad
one is an error naming its key path and where it came from (``run.yaml: retriever_options.alpah:
...``). The method's options and the retriever's are checked against their registries by
``dynrag.run.plan.make_plan`` (``section_options``), once the plan knows which method and which
retriever (a preset's, when none is named) they belong to.

An eval run directory keeps the resolved configuration as ``config.yaml`` (written by the runner
with these keys), so ``dynrag eval --config RUN/config.yaml`` runs the same evaluation again:
into the same directory it resumes, into another (``--out``) it reproduces it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, ValidationError, field_validator

from dynrag.errors import ConfigError, DataError, plain_error, unencodable
from dynrag.registry import Options, parse_pairs, split_csv_pairs

CONFIG_YAML = "config.yaml"


class RunConfig(Options):
    """Every key of a run configuration file (see docs/evaluation.md for a complete example)."""

    # what answers
    method: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)  # the method's options
    model: str = "bundled"
    exemplars: str | None = None
    # what it searches
    retriever: str | None = None  # None: the chain preset's (hybrid for balanced/best), else bm25
    retriever_options: dict[str, Any] = Field(default_factory=dict)
    index: Path | None = None  # ask: an index directory
    corpus: str | None = None  # eval, eval-retrieval: "contexts" or an index directory
    # the benchmark
    dataset: str | None = None
    data: Path | None = None
    limit: int | None = Field(None, ge=1)
    shard: str | None = None  # I/K: every K-th question from the I-th, after limit (datasets/shard.py)
    aliases: Path | None = None
    skip_bad: bool = False
    baseline: Path | None = None
    out: Path | None = None
    scorer: str = "squad"  # eval: how answers are scored (dynrag.datasets.metrics.SCORERS)
    # eval: how to run (not part of a run's identity; config.yaml does not record them)
    workers: int | Literal["auto"] | None = None  # None: auto
    dask: str | None = None  # a Dask scheduler address, e.g. tcp://HOST:8786
    concurrency: int = 1  # (checked with --workers and --dask) questions in flight against a model behind an HTTP server
    batch: int | None = None  # questions in flight in this process, their generations batched (lm/batch_engine.py)
    # eval-retrieval: recall@K cut-offs (`options.k` is something else: passages per retrieval)
    cutoffs: list[int] = Field(default_factory=lambda: [3, 10])
    # eval-retrieval: what is searched instead of the bare question (retrieval/query_transforms.py)
    query_transform: str = "none"  # none, hyde, hyde-only, hyde-multi, rewrite, decompose
    hyde: bool = False  # the older name of query_transform: hyde
    hyde_cache: Path | None = None  # JSONL of the transform's texts (any transform's)
    hyde_max_new_tokens: int = Field(64, ge=1)
    hyde_documents: int = Field(3, ge=1)  # hyde-multi: passages after the question
    # Where each key's value came from (a file or a flag), for messages about it.
    _origin: dict[str, str | None] = PrivateAttr(default_factory=dict)
    _source: str | None = PrivateAttr(default=None)

    def given_by(self, *flags: str) -> dict[str, str]:
        """The keys (``options.theta``) whose values one of ``flags`` gave, to that flag."""
        return {key: flag for key, flag in self._origin.items() if flag in flags}

    @field_validator("workers", mode="before")
    @classmethod
    def _workers(cls, value: Any) -> Any:
        if value is None or value == "auto":
            return value
        number = int(value) if isinstance(value, str) and value.strip().isdigit() else value
        if not isinstance(number, int) or isinstance(number, bool) or number < 1:
            raise ValueError("expected a number of worker processes >= 1, or auto")
        return number

    @field_validator("shard", mode="before")
    @classmethod
    def _shard(cls, value: Any) -> Any:
        from dynrag.datasets.shard import Shard

        if value is None:
            return value
        problem = Shard.problem(str(value))
        if problem is not None:  # the loader names the flag or the file's key
            raise ValueError(problem)
        return str(Shard.parse(str(value)))

    @field_validator("query_transform")
    @classmethod
    def _query_transform(cls, value: str) -> str:
        from dynrag.retrieval.transform_registry import QUERY_TRANSFORMS

        if value not in QUERY_TRANSFORMS:
            raise ValueError(f"unknown query transform; choose one of: {QUERY_TRANSFORMS.choices(', ')}")
        return value

    @field_validator("cutoffs", mode="before")
    @classmethod
    def _ks(cls, value: Any) -> Any:
        if isinstance(value, (str, int)):
            value = [part for part in str(value).split(",") if part.strip()]
        if isinstance(value, list) and not value:
            raise ValueError("needs at least one cut-off, e.g. [3, 10]")
        return value

    @field_validator("cutoffs")
    @classmethod
    def _ks_positive(cls, value: list[int]) -> list[int]:
        if min(value) < 1:
            raise ValueError("cut-offs must be >= 1")
        return sorted(set(value))


# The command-line flag of each key, for messages about values that came from the command line.
FLAGS = {name: "--" + name.replace("_", "-") for name in RunConfig.model_fields}
FLAGS.update({"options": "--option", "retriever_options": "--retriever-option", "cutoffs": "--cutoffs", "index": "--corpus"})
# Keys a run configuration once had under another name: old files keep working, with a warning.
RENAMED_KEYS = {"k": "cutoffs"}


def read_config_file(path: Path) -> dict[str, Any]:
    """The mapping in a YAML run configuration; errors name the file (and line)."""
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(str(path), f"cannot read the run configuration ({exc.strerror or exc})") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise DataError(str(path), f"not valid YAML ({problem})", mark.line + 1 if mark else None) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise DataError(str(path), f"a run configuration is a mapping of keys, got {type(data).__name__}")
    problem = unencodable(data)  # a "\uDXXX" escape in a quoted YAML string
    if problem is not None:
        raise DataError(str(path), problem)
    return data


def load_run_config(
    path: Path | None,
    flags: Mapping[str, Any],
    option_pairs: Sequence[str] = (),
    retriever_pairs: Sequence[str] = (),
    *,
    option_flag: str = "--option",
    retriever_flag: str = "--retriever-option",
) -> RunConfig:
    """The file at ``path`` (if any) with the given flags over it, validated. ``flags`` holds the
    flags the user gave (None values mean "not given"); the pairs are KEY=VALUE strings."""
    source = str(path) if path is not None else None
    values: dict[str, Any] = read_config_file(path) if path is not None else {}
    for old, new in RENAMED_KEYS.items():
        if old in values and new not in values:
            values[new] = values.pop(old)
            warn_deprecated(f"{source}: key {old!r} is now {new!r}")
    origin = {key: source for key in values}
    for key, value in flags.items():
        if value is not None:
            values[key], origin[key] = value, FLAGS.get(key, key)
    # --retriever-option url=...,index=... : several pairs in one flag
    retriever_pairs = split_csv_pairs(retriever_pairs)
    for key, pairs, flag in (("options", option_pairs, option_flag), ("retriever_options", retriever_pairs, retriever_flag)):
        given = parse_pairs(pairs, flag) if pairs else {}
        nested = values.get(key) or {}
        if not isinstance(nested, dict):
            raise ConfigError(f"{source}: {key}: expected a mapping of KEY: VALUE, got {type(nested).__name__}")
        if given:
            values[key] = {**nested, **given}
            origin.update({f"{key}.{k}": flag for k in given})
    try:
        config = RunConfig(**values)
    except ValidationError as exc:
        raise ConfigError(_message(exc, origin, source)) from exc
    # The options are checked once, by make_plan, against the method and retriever it settles on.
    config._origin, config._source = origin, source
    return config


def _where(key: str, origin: Mapping[str, str | None], source: str | None) -> str:
    """The flag or file a key's value came from, and the key when the flag does not name it:
    ``--limit``, ``--option theta of method 'flare'``, ``run.yaml: options.theta of method 'flare'``."""
    path, _, of = key.partition(" ")
    top, _, inner = path.partition(".")
    where = origin.get(path) or origin.get(top) or source or FLAGS.get(top, top)
    if not where.startswith("-"):
        return f"{where}: {key}"
    # --limit names its key; --option names its section, not the option within it
    return " ".join(part for part in (where, inner, of) if part)


def _message(
    exc: ValidationError, origin: Mapping[str, str | None], source: str | None, prefix: str = "", of: str = ""
) -> str:
    err = exc.errors()[0]
    # a check across a whole section has no loc of its own: the section is the key
    key = ".".join([prefix.rstrip(".")] * bool(prefix) + [str(p) for p in err["loc"]]) + of
    what = plain_error(err)
    if err["type"] == "extra_forbidden" and not prefix:
        what += f"; valid keys: {', '.join(RunConfig.model_fields)}"
    return f"{_where(key, origin, source)}: {what}"


def section_options(config: RunConfig, key: Literal["options", "retriever_options"], name: str) -> Options:
    """``options`` validated into method ``name``'s model, or ``retriever_options`` into retriever
    ``name``'s: the one place a run's options are checked (by ``make_plan``), with errors naming
    the key path and the file or flag each value came from."""
    if key == "options":
        from dynrag.methods.registry import METHODS as registry
    else:
        from dynrag.retrieval.factory import RETRIEVERS as registry
    origin, source = config._origin, config._source
    values = getattr(config, key)
    entry = registry.get(name)  # unknown names list the choices
    fields = entry.options.model_fields
    for option in values:
        if option not in fields:
            raise ConfigError(
                f"{_where(f'{key}.{option} of {registry.kind} {name!r}', origin, source)}: unknown option; "
                f"valid options: {', '.join(sorted(fields)) or 'none'}"
            )
    try:
        return entry.options(**values)
    except ValidationError as exc:
        raise ConfigError(_message(exc, origin, source, prefix=f"{key}.", of=f" of {registry.kind} {name!r}")) from exc


def warn_deprecated(message: str) -> None:
    """One line on stderr about a name that still works but will go."""
    import sys

    print(f"warning: {message} (the old name is deprecated and will be removed)", file=sys.stderr)


def require(config: RunConfig, *keys: str) -> None:
    """Each key must be set, by a flag or by the file."""
    for key in keys:
        if getattr(config, key) is None:
            raise ConfigError(f"{FLAGS[key]} is required (or `{key}:` in --config)")
