"""`dynrag reproduce TABLE`: every run of a paper's table with the paper's settings, beside its numbers.

A table is a registry entry (``TABLES``): its runs (dataset, method, options, each the paper's or the
authors' released setting) and the published cells it compares with (``data/published.json``, typed
once with their source). Each run is an ordinary `dynrag eval` run directory under ``--out``, so a
killed reproduction resumes where it stopped and tables that share runs (DRAGIN's Tables 2 and 3)
compute them once. Datasets without data are reported and left out; the rest still runs.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from pydantic import Field

from dynrag.datasets.shard import Shard
from dynrag.errors import ConfigError, DataError
from dynrag.run.jobs import JobOptions
from dynrag.reproduce.catalog import open_table
from dynrag.reproduce.tables import RunSpec, Table

# Where the dev file of a benchmark read as generic JSONL (no format of its own in the dataset
# registry, whose entries carry their own `default_files`) sits inside `--data-dir`.
JSONL_FILES = {
    "nq": "nq/nq_open_oracle_dev_500.jsonl",  # NQ-open with each question's gold passage
    "webquestions": "webquestions/webquestions.jsonl",  # not released in this layout
}


class ReproduceRequest(JobOptions):
    """The `reproduce` job's options, typed once from the command line (KEY=VALUE pairs parsed there);
    each kind of table reads its part (reproduce/kinds.py), and a flag a kind does not read is refused."""

    table: str
    options: dict[str, Any] = Field(default_factory=dict)  # the table's options (KEY=VALUE values)
    limit: int | None = None
    shard: str | None = None  # I/K: each row's I-th of K shards (datasets/shard.py); --no-run joins them
    model: str = "bundled"
    retriever: str | None = None
    retriever_options: dict[str, Any] = Field(default_factory=dict)  # parsed once, from --retriever-option
    corpus: str = "contexts"
    # dataset -> file; a file given without DATASET= is keyed "" (the reader figure takes one bare file)
    data: dict[str, Path] = Field(default_factory=dict)
    data_dir: Path | None = None
    out: Path = Path("runs/reproduce")
    datasets: list[str] | None = None  # only these of the table's datasets
    rows: list[str] | None = None  # only these rows (run keys, e.g. dragin)
    run: bool = True  # False: resolve data and show what would run, and the published numbers
    batch: int = 1  # questions in flight per run, their generations batched (not part of a run's identity)
    workers: int | str = 1  # worker processes per run, each with its own model: N or "auto" (not part of its identity)
    world: Path | None = None  # `reproduce world`: the world directory (dynrag world make --out)
    tuned: list[Path] = Field(default_factory=list)  # `dynrag tune` directories: their best values replace defaults
    skip_bad: bool = False  # skip and count malformed records in each row's questions
    readers: dict[str, str] = Field(default_factory=dict)  # the reader figure: row key -> trained reader
    write: Path | None = None  # also write the page here
    progress: bool = True
    results: Path | None = None  # also write the run's result record into this directory

    def given(self) -> list[str]:
        """The fields set to something other than their default, in declaration order."""
        from dynrag.lm.spec import ModelSpec

        named = []
        for name, info in type(self).model_fields.items():
            value, default = getattr(self, name), info.get_default(call_default_factory=True)
            if name == "model":  # `bundled` and `bundled:qwen2.5-0.5b` are one model
                changed = ModelSpec.parse(value) != ModelSpec.parse(default)
            else:
                changed = value != default
            if changed and name != "table":
                named.append(name)
        return named


# The flag each field comes from, where it is not the field's name spelled as a flag.
FLAG_OF_FIELD = {"options": "--option", "retriever_options": "--retriever-option", "datasets": "--dataset",
                 "rows": "--row", "readers": "--reader", "run": "--no-run"}


def flag_of(field_name: str) -> str:
    return FLAG_OF_FIELD.get(field_name, "--" + field_name.replace("_", "-"))


def check_rows(rows: list[str] | None, keys: list[str], table: str) -> None:
    """Refuse a ``--row`` that the table does not have, naming the rows it has."""
    keys = list(dict.fromkeys(keys))
    bad = sorted(set(rows or []) - set(keys))
    if bad:
        raise ConfigError(f"--row {bad[0]!r}: table {table!r} has rows {', '.join(keys)}")


def find_data(table: Table, req: ReproduceRequest) -> tuple[dict[str, Path], dict[str, str]]:
    """(dataset -> file for those found, dataset -> why not for the rest)."""
    if "" in req.data:
        raise ConfigError(f"--data {req.data['']}: name its dataset, DATASET=FILE (e.g. hotpotqa=dev.json)")
    unknown = sorted(set(req.data) - set(table.datasets))
    if unknown:
        raise ConfigError(f"--data {unknown[0]}=...: table {table.name!r} has datasets {', '.join(table.datasets)}")
    wanted = table.datasets if req.datasets is None else req.datasets
    bad = sorted(set(wanted) - set(table.datasets))
    if bad:
        raise ConfigError(f"--dataset {bad[0]!r}: table {table.name!r} has datasets {', '.join(table.datasets)}")
    found, missing = {}, {}
    for ds in wanted:
        if ds in req.data:
            path = Path(req.data[ds])
            if not path.is_file():
                raise DataError(str(path), f"--data {ds}=: no such file")
            found[ds] = path
        elif req.data_dir is not None and (placed := _placed(Path(req.data_dir), ds)) is not None:
            found[ds] = placed
        else:
            places = _places(ds) if req.data_dir else ()
            where = f" or put it at {Path(req.data_dir) / places[0]}" if places else "" if req.data_dir else " or --data-dir DIR"
            missing[ds] = f"no data: give --data {ds}=PATH{where}"
    return found, missing


def _places(ds: str) -> tuple[str, ...]:
    from dynrag.datasets.formats import dataset_spec

    return (JSONL_FILES[ds],) if ds in JSONL_FILES else dataset_spec(ds).default_files


def _placed(data_dir: Path, ds: str) -> Path | None:
    """The first of the dataset's usual places that holds a file under ``data_dir``."""
    return next((data_dir / p for p in _places(ds) if (data_dir / p).is_file()), None)


def slug(text: str) -> str:
    """A directory name for a setting: its safe characters, long ones cut to a tail and a hash."""
    clean = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")
    if len(clean) > 60:  # long paths (hf:/some/dir) keep a readable tail and a hash
        clean = clean[-40:] + "-" + hashlib.sha256(text.encode()).hexdigest()[:8]
    return clean


def run_dir(req: ReproduceRequest, spec: RunSpec) -> Path:
    """Shared by tables and paper models: the same model, retriever, corpus, method settings and
    limit give the same directory (a short hash of the settings tells settings apart)."""
    from dynrag.lm.loader import resolve_model

    setting = f"{resolve_model(req.model)}_{req.retriever or 'default'}_{req.corpus}"
    digest = hashlib.sha256(
        json.dumps([spec.method, spec.options, spec.retriever] + ([spec.model] if spec.model else []),
                   sort_keys=True).encode()
    ).hexdigest()[:6]
    shard = f"-{Shard.parse(req.shard).slug}" if req.shard else ""
    return Path(req.out) / slug(setting) / spec.dataset / f"{spec.directory or spec.key}-{digest}-n{req.limit or 'all'}{shard}"


def reproduce(req: ReproduceRequest, console=None, progress: bool = True, method_factory=None) -> dict[str, Any]:
    """Run (or resume) every run of the table that has data; returns what `render` prints.

    ``method_factory`` is the eval runner's (tests pass a fast stand-in)."""
    from rich.console import Console

    from dynrag.config import load_run_config
    from dynrag.eval.runner import run_eval
    from dynrag.run.checks import check_execution
    from dynrag.run.plan import make_plan

    console = console or Console(stderr=True)
    if req.limit is not None and req.limit < 1:
        raise ConfigError(f"--limit must be at least 1 (got {req.limit})")
    check_execution(workers=req.workers, batch=req.batch)  # before any run directory or index is written
    table = open_table(req.table, req.options)
    if req.shard is not None:
        req = req.model_copy(update={"shard": str(Shard.parse(req.shard))})
        if not table.carries_rows:
            raise ConfigError(f"--shard {req.shard}: table {table.name!r} reads more of each question than its "
                              "shards' records keep, so its rows cannot be joined from shards; run it whole")
    table.runs = capable_runs(table.runs, req.model)
    # first: a typo in --row is the whole answer, before any dataset's warning or a world's index build
    check_rows(req.rows, [s.key for s in table.runs], table.name)
    if table.prepare is not None:
        req = table.prepare(req)
    elif req.world is not None:
        raise ConfigError(f"--world: table {req.table!r} does not read a world (world, world-figure8, "
                          "deeprag-figure3, deeprag-figure5, deeprag-figure6 and dynamic-family do)")
    found, missing = find_data(table, req)
    tunes = apply_tunes(table, req.tuned, shown={*found, *missing})
    for ds, why in missing.items():
        console.print(f"[yellow]{ds}: {why}; its rows are left out[/yellow]")
    results: dict[tuple[str, str], dict[str, Any] | None] = {}
    runnable = [s for s in table.runs if not s.published_only]
    todo = [s for s in runnable if s.dataset in found and (req.rows is None or s.key in req.rows)]
    by_key = {(s.dataset, s.key): s for s in table.runs}
    wanted = {(s.dataset, s.baseline) for s in todo if s.baseline} | {(s.dataset, s.key) for s in todo}
    # a row's baseline runs before it, once
    todo = [s for s in runnable if (s.dataset, s.key) in wanted and s.dataset in found]
    baselines = {s.baseline for s in table.runs if s.baseline}
    todo.sort(key=lambda s: s.key not in baselines)  # stable: table order otherwise
    for i, spec in enumerate(todo, 1):
        out = run_dir(req, spec)
        console.print(f"[bold]run {i}/{len(todo)}[/bold] {spec.dataset} {spec.label}: {out}")
        if req.run:
            flags = dict(
                dataset=spec.reader or spec.dataset, data=found[spec.dataset], method=spec.method, out=out,
                corpus=req.corpus, limit=req.limit, shard=req.shard, model=spec.model or req.model, options=dict(spec.options),
                retriever=spec.retriever or req.retriever, scorer=spec.scorer or table.scorer,
                workers=req.workers if method_factory is None else 1,
                batch=req.batch if req.batch > 1 and method_factory is None else None,
                baseline=run_dir(req, by_key[(spec.dataset, spec.baseline)]) if spec.baseline else None,
                retriever_options=dict(req.retriever_options) or None, skip_bad=req.skip_bad or None,
            )
            plan = make_plan(load_run_config(None, flags), command="eval")
            summary = run_eval(plan, method_factory=method_factory, console=console, progress=progress)
        else:
            summary = _existing_summary(out)
        if summary is not None:
            summary["run_dir"] = str(out)  # where its per-question records are, for tables that test claims on them
        results[(spec.dataset, spec.key)] = summary
    shown = [ds for ds in table.datasets if ds in found or ds in missing]
    return {"table": table, "results": results, "missing": missing, "request": req, "datasets": shown,
            "tuned": tunes, "data": found}


def capable_runs(runs: list[RunSpec], model: str) -> list[RunSpec]:
    """``runs`` with each row whose method needs what the command's ``model`` cannot give on its
    backend moved to the same weights on a backend that gives it, and labelled so (no method
    needs this today: both local backends give every trait); a row that names its own model, and
    every row under a server's model, stay as they are."""
    from dataclasses import replace

    from dynrag.lm.base import BACKEND_CAPABILITIES
    from dynrag.lm.spec import ModelSpec
    from dynrag.methods.registry import method_traits

    spec = ModelSpec.parse(model)
    able = spec.most_capabilities
    if able is None:
        return runs

    def moved(run: RunSpec) -> RunSpec:
        if run.model is not None or run.published_only:
            return run
        traits = method_traits(run.method)
        if traits.runs_on(able):
            return run
        for backend, offers in BACKEND_CAPABILITIES.items():
            if traits.runs_on(offers):
                return replace(run, model=str(spec.with_options(backend=backend)), label=f"{run.label} ({backend} backend)")
        return run  # no backend gives it: the run refuses with its own message

    return [moved(r) for r in runs]


def apply_tunes(table: Table, tuned: list[Path], shown: set[str] | None = None) -> list[str]:
    """Each row a tune applies to (its method, and every option the tune held fixed) runs at the
    tune's best values, its label saying so; one line per tune for the table's header, naming the
    settings it replaced on the ``shown`` datasets (default: all)."""
    from dataclasses import replace

    from dynrag.methods.registry import parse_options
    from dynrag.tune.tuned import read_tuned

    lines = []
    for directory in tuned:
        tune = read_tuned(directory)
        hits = [i for i, s in enumerate(table.runs) if tune.applies_to(s.method, s.options)]
        if not hits:
            raise ConfigError(f"--tuned {directory}: tunes {tune.method!r} with {tune.fixed or 'default options'}, "
                              f"which no row of table {table.name!r} runs")
        if tune.retriever_options:
            raise ConfigError(f"--tuned {directory}: tuned retriever options ({', '.join(tune.retriever_options)}); "
                              "give them to reproduce as --retriever-option")
        values = ", ".join(f"{k}={v}" for k, v in tune.options.items())
        replaced: dict[str, list[str]] = {}  # the rows' own settings (the published ones) -> their datasets
        for i in hits:
            spec = table.runs[i]
            resolved = parse_options(spec.method, dict(spec.options)).model_dump()  # a default shown as its value
            own = ", ".join(f"{k}={resolved.get(k)}" for k in tune.options)
            if shown is None or spec.dataset in shown:
                replaced.setdefault(own, []).append(spec.dataset)
            table.runs[i] = replace(spec, options={**spec.options, **tune.options}, label=f"{spec.label} (tuned {values})")
        instead = "; ".join(f"{own} ({', '.join(dict.fromkeys(datasets))})" for own, datasets in replaced.items())
        lines.append(f"Tuned: {tune.method} at {tune.describe()}" + (f", in place of the rows' {instead}." if instead else "."))
    return lines


def _existing_summary(out: Path) -> dict[str, Any] | None:
    path = out / "summary.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
