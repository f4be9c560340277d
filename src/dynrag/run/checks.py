"""Checks a plan shares with the other resumable runs (``dynrag synth``): the benchmark file and
its aliases, what a ``--corpus`` names and its checksum. Each reads files only; none writes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dynrag.errors import ConfigError, DataError
from dynrag.io.files import file_sha256


@dataclass(frozen=True)
class DatasetPlan:
    """A benchmark file and how to read it. ``given``: the path as the user wrote it (for messages);
    ``data``: resolved."""

    name: str
    given: Path
    data: Path
    data_sha256: str | None = None
    aliases: Path | None = None
    aliases_sha256: str | None = None
    limit: int | None = None
    shard: str | None = None  # I/K (datasets/shard.py), checked by RunConfig
    skip_bad: bool = False
    yes_no: bool = False
    exemplar_style: str = "default"


def check_data_file(given: Path, dataset: str) -> Path:
    """``--data``: an existing benchmark file (not a directory); returns it resolved."""
    data = Path(given).resolve()
    if data.is_dir():
        raise DataError(str(given), f"is a directory; --data takes the benchmark file itself ({dataset})")
    if not data.is_file():
        raise DataError(str(given), "no such file")
    return data


def check_aliases(aliases: Path | None, dataset: str) -> None:
    """``--aliases`` only for a dataset whose entry takes an alias file."""
    from dynrag.datasets.formats import dataset_names, dataset_spec

    if aliases is not None and not dataset_spec(dataset).aliases:
        takers = " / ".join(dataset_names(lambda d: d.aliases))
        raise ConfigError(f"--aliases applies to --dataset {takers} only")


def check_dataset(config: Any, *, sha256: bool) -> DatasetPlan:
    """The benchmark a RunConfig names: its registry entry, the alias rule and the data file
    (with checksums when ``sha256``: what an eval run records to notice a changed file)."""
    from dynrag.datasets.formats import dataset_spec

    entry = dataset_spec(config.dataset)
    check_aliases(config.aliases, entry.name)
    data = check_data_file(config.data, entry.name)
    aliases = Path(config.aliases).resolve() if config.aliases else None
    return DatasetPlan(
        entry.name, Path(config.data), data,
        file_sha256(data, Path(config.data)) if sha256 else None,
        aliases, file_sha256(Path(config.aliases)) if sha256 and config.aliases else None,
        config.limit, config.shard, config.skip_bad, entry.yes_no, entry.exemplar_style,
    )


def corpus_identity(corpus: str) -> tuple[Path | None, str, str | None]:
    """``--corpus``: (the index directory or None for the pooled contexts, what a run records of
    it, the index's corpus checksum)."""
    index = check_corpus(corpus)
    if index is None:
        return None, "contexts", None
    from dynrag.retrieval.manifest import read_manifest

    resolved = str(index.resolve())
    return index, resolved, read_manifest(resolved)["corpus_sha256"]


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


# What `dynrag tune --out DIR` writes (dynrag.tune, a floor above this one, names them too): a
# tune folder given as --corpus is a mix-up to name, not an index to rebuild.
TUNE_MARKS = ("study.db", "best.yaml", "tuned.json")


def check_corpus(corpus: str) -> Path | None:
    """``--corpus``: "contexts" (None: pooled per run) or an existing index directory."""
    if corpus == "contexts":
        return None
    path = Path(corpus)
    if not path.is_dir():
        raise ConfigError(f"--corpus {corpus}: no such index directory (or use --corpus contexts)")
    if any((path / mark).exists() for mark in TUNE_MARKS):
        raise ConfigError(f"--corpus {corpus}: a `dynrag tune` folder, not an index (run its best configuration with "
                          f"`dynrag eval --config {path / 'best.yaml'}`, or pass --corpus contexts or an index directory)")
    return path


def check_execution(*, workers: int | str = 1, dask: str | None = None, concurrency: int = 1, batch: int = 1) -> None:
    """``--workers N|auto``, ``--dask ADDRESS``, ``--concurrency N`` and ``--batch N`` are each valid
    and exclusive; callers check before they write anything, and `make_executor` checks again for
    direct callers."""
    if concurrency < 1:
        raise ConfigError(f"--concurrency must be at least 1 (got {concurrency})")
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise ConfigError(f"--batch must be a number >= 1 (got {batch!r})")
    if batch > 1 and (dask or concurrency > 1):
        raise ConfigError("--batch and --dask/--concurrency: pick one (--batch keeps N questions in flight per "
                          "process, their generations decoded together by one local model)")
    if concurrency > 1 and (dask or workers not in (1, "auto")):
        raise ConfigError("--concurrency and --workers/--dask: pick one (--concurrency keeps N questions "
                          "in flight against one model server from this process)")
    if dask and workers not in (1, "auto"):
        raise ConfigError("--dask and --workers: pick one (a Dask cluster brings its own workers)")
    if workers != "auto" and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
        raise ConfigError(f"--workers must be a number >= 1 or 'auto' (got {workers!r})")
