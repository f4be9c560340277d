"""The result record of one `dynrag reproduce TABLE --results DIR` run, built from what the table
printed: the rows' summaries, the published cells shown beside them, the claim lines' decisions
(``ClaimLine``s, so nothing is tested twice) and the run's provenance."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dynrag.datasets.shard import Shard
from dynrag.reproduce.claims import decided_in
from dynrag.reproduce.ledger import load_ledger
from dynrag.io.files import file_sha256
from dynrag.reproduce.provenance import git_commit, load_text, machine, today
from dynrag.reproduce.records import ClaimResult, Provenance, ResultRecord, Row
from dynrag.reproduce.runs import ReproduceRequest, slug
from dynrag.reproduce.tables import Table, published, records_of, summary_figure

# summary.json key -> the record's cell name (EM and F1 as fractions, as summaries hold them)
# ("a.b": a nested figure; a world's question MCC: did not retrieve against needed nothing)
CELLS = {"em": "em", "f1": "f1", "accuracy": "accuracy", "retrievals_per_question": "retrievals",
         "wall_seconds_per_question": "seconds_per_question", "retrieval_decisions.mcc": "question_mcc"}
# Per-question figures a record keeps of each row (predictions.jsonl key), enough to test a claim
# against the row again once its run directory is gone; F1 is rounded, the rest are counts or 0/1
# (a world question's needs_retrieval: 1 when a hop is unknown to the reader, 0 when none is).
SCORES = ("em", "f1", "retrievals", "needs_retrieval")
SCORE_DIGITS = 4


@dataclass(frozen=True)
class RunContext:
    """What the command knows of the run beyond its report."""

    command: str  # the command line as typed
    wall_s: float
    load_start: float | None
    load_end: float | None


def row_cells(summary: dict[str, Any]) -> dict[str, float]:
    return {name: float(value) for key, name in CELLS.items() if (value := summary_figure(summary, key)) is not None}


Scores = dict[str, list[float | None]]  # metric -> one value per question id, None where there is none


def row_scores(table: Table, results: dict[tuple[str, str], Any]) -> tuple[dict[str, list[str]],
                                                                           dict[tuple[str, str], Scores]]:
    """(dataset -> question ids in the order the rows answered them, (dataset, row) -> metric ->
    one value per id, None where the row has no answer) for every row with per-question records."""
    questions: dict[str, dict[str, None]] = {}
    by_row: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    for s in table.runs:
        records = records_of(results.get((s.dataset, s.key)))
        if not records:
            continue
        ids = questions.setdefault(s.dataset, {})
        row = by_row[(s.dataset, s.key)] = {m: {} for m in SCORES}
        for r in records:
            qid = str(r["id"])
            ids.setdefault(qid)
            for m in SCORES:
                if isinstance(r.get(m), (int, float)):
                    row[m][qid] = round(float(r[m]), SCORE_DIGITS)
    ordered = {ds: list(ids) for ds, ids in questions.items()}
    scores = {key: {m: [values.get(q) for q in ordered[key[0]]] for m, values in row.items() if values}
              for key, row in by_row.items()}
    return ordered, scores


def published_group(table: Table) -> str | None:
    """The paper model group of data/published.json whose cells the table shows (None: none)."""
    if not table.published_cells:
        return None
    groups = published()["tables"].get(table.name, {}).get("cells", {})
    return next((name for name, cells in sorted(groups.items()) if cells == table.published_cells), None)


def published_beside(table: Table, rows: Sequence[Row]) -> dict[str, dict[str, dict[str, float]]]:
    """The published cells of the record's rows (datasets and row keys it holds)."""
    shown: dict[str, dict[str, dict[str, float]]] = {}
    for row in rows:
        cells = table.published_cells.get(row.dataset, {}).get(row.key)
        if cells:
            shown.setdefault(row.dataset, {})[row.key] = dict(cells)
    return shown


def model_name(spec: Any) -> str:
    """A short name of a parsed model spec for the record's id: the bundled name, the hf path's
    last part or the served model, with its model options."""
    name = spec.target if spec.kind == "bundled" else (spec.file or Path(spec.target).name)
    return slug(name + (f"-{spec.query}" if spec.query else ""))


def corpus_name(req: ReproduceRequest) -> str:
    if req.world is not None:
        return f"world:{Path(req.world).name}"
    return req.corpus if req.corpus == "contexts" else Path(req.corpus).name


def model_sha256(spec: Any) -> str | None:
    """The recorded sha256 of a bundled model's joined weights (lm/bundled.py); None for the rest,
    whose weights are not hashed here (hundreds of MB for a figure nobody asked to verify)."""
    from dynrag.lm.bundled import resolve_bundled

    return resolve_bundled(spec.target).sha256 if spec.kind == "bundled" else None


def data_files(req: ReproduceRequest, found: dict[str, Path]) -> tuple[str | None, str | None]:
    """The data files as written under ``--data-dir`` (else as given) and their sha256; several
    datasets' are joined by ", " in the record's dataset order."""
    names, sums = [], []
    for ds, path in found.items():
        path = Path(path)
        try:
            shown = str(path.relative_to(req.data_dir)) if req.data_dir is not None else str(path)
        except ValueError:
            shown = str(path)
        names.append(shown)
        sums.append(file_sha256(path))
    return (", ".join(names) or None), (", ".join(sums) or None)


def record_id(table: Table, req: ReproduceRequest, model: str, datasets: Sequence[str], corpus: str) -> str:
    """``TABLE.MODEL.DATASETS-CORPUS-nLIMIT`` (plus the table options and rows when given): a rerun
    of the same setting replaces its record; another setting gets its own."""
    parts = [table.name, model, f"{'+'.join(datasets) or 'none'}-{corpus}-n{req.limit or 'all'}"]
    if req.options:
        parts.append("-".join(f"{k}={v}" for k, v in sorted(req.options.items())))
    if req.rows:
        parts.append("rows-" + "+".join(req.rows))
    if req.tuned:  # rows at tuned values are another setting: never the record of the published ones
        parts.append("tuned-" + "+".join(Path(d).name for d in req.tuned))
    if req.shard:  # last, so that a row's shards are found by the whole table's id (reproduce/shards.py)
        parts.append(Shard.parse(req.shard).slug)
    return ".".join(slug(p.replace("+", "_")) for p in parts)


def _report_setting(report: dict[str, Any]) -> tuple[Any, dict[str, Any], list[str], str, str]:
    """(parsed model spec, dataset -> data file, the datasets recorded, corpus name, record id) of
    a QA table's report."""
    from dynrag.lm.loader import resolve_model
    from dynrag.lm.spec import ModelSpec

    table: Table = report["table"]
    req: ReproduceRequest = report["request"]
    spec = ModelSpec.parse(resolve_model(req.model))
    found = {ds: p for ds, p in (report.get("data") or {}).items()}
    datasets = [ds for ds in report.get("datasets", table.datasets) if ds in found]
    corpus = corpus_name(req)
    return spec, found, datasets, corpus, record_id(table, req, model_name(spec), datasets, corpus)


def table_record_id(report: dict[str, Any]) -> str:
    """The id the record of this QA table's report gets (``table_record``'s)."""
    return _report_setting(report)[4]


def table_record(report: dict[str, Any], lines: Sequence[str], context: RunContext) -> ResultRecord:
    table: Table = report["table"]
    req: ReproduceRequest = report["request"]
    spec, found, datasets, corpus, record_name = _report_setting(report)
    questions, scores = row_scores(table, report["results"])
    rows = [Row(dataset=s.dataset, key=s.key, label=s.label, n=summary.get("n"), cells=row_cells(summary),
                scores=scores.get((s.dataset, s.key), {}), carried_from=summary.get("carried_from"))
            for s in table.runs if (summary := report["results"].get((s.dataset, s.key)))]
    known = load_ledger().ids()
    claims = [ClaimResult(claim=d.ledger if d.ledger in known else None, text=d.text, dataset=d.dataset, test=d.test,
                          n=d.n, p=d.p, difference=d.difference, verdict=d.verdict) for d in decided_in(lines)]
    data, data_sha = data_files(req, found)
    wall_s, load = round(context.wall_s, 1), load_text(context.load_start, context.load_end)
    if not req.run:
        # --no-run only renders: the figures cost what their rows took (each run's timing.json,
        # every session), and the load while they ran was not seen by this command.
        walls = [s.get("wall_seconds") for s in report["results"].values() if s]
        wall_s = round(sum(walls), 1) if walls and all(isinstance(w, (int, float)) for w in walls) else None
        load = None
    return ResultRecord(
        id=record_name, kind="table", table=table.name,
        title=f"{table.title} with {model_name(spec)}, {', '.join(datasets) or 'no data'} ({corpus})"
              + (f", shard {req.shard}" if req.shard else ""), reader=str(spec), shard=req.shard,
        datasets=datasets, corpus=corpus, rows=rows, published_group=published_group(table),
        published=published_beside(table, rows), claims=claims,
        provenance=Provenance(commit=git_commit(), command=context.command, model=str(spec),
                              model_sha256=model_sha256(spec), data=data, data_sha256=data_sha, corpus=corpus,
                              load=load, machine=machine(), wall_s=wall_s, date=today()),
        questions={ds: ids for ds, ids in questions.items() if any(r.scores for r in rows if r.dataset == ds)},
    )


def retrieval_record(report: dict[str, Any], context: RunContext) -> ResultRecord:
    """The record of a retrieval-only table (``reproduce_retrieval``'s report): per dataset and row
    its ranking figures as fractions (words@K as words), the paper's typed cells of those rows, and
    the paper's claims decided per dataset as ``render_retrieval`` prints them."""
    from dynrag.lm.loader import resolve_model
    from dynrag.lm.spec import ModelSpec
    from dynrag.reproduce.claims import decide

    table, req, results = report["table"], report["request"], report["results"]
    settings = report["settings"]
    found = {ds: Path(p) for ds, p in (report.get("data") or {}).items() if ds in report["found"]}
    datasets = [ds for ds in report["found"] if ds in found]
    rows = [Row(dataset=ds, key=r.key, label=r.label, n=summary.get("n"),
                cells={k: float(v) for k, v in summary.get("table_scores", {}).items() if isinstance(v, (int, float))})
            for ds in datasets for r in table.rows
            if (summary := results.get((ds, r.key))) and "error" not in summary]
    known, claims = load_ledger().ids(), []
    for ds in datasets:
        for claim in table.claims:
            scores = [{q: s[claim.metric] for q, s in (results.get((ds, key)) or {}).get("question_scores", {}).items()
                       if claim.metric in s} for key in (claim.better, claim.worse)]
            if scores[0] and scores[1]:
                v = decide(claim, *scores)
                claims.append(ClaimResult(claim=claim.ledger if claim.ledger in known else None, text=claim.text,
                                          dataset=ds, test=v.test, n=v.n, p=v.p,
                                          difference=v.difference, verdict=v.verdict))
    spec = ModelSpec.parse(resolve_model(req.model))
    uses_model = table.needs_model or bool(table.reads and settings.reader)
    typed = published()["tables"].get(table.name, {}).get("cells", {})
    group = "paper" if "paper" in typed else None
    keys = {(row.dataset, row.key) for row in rows}
    shown = {ds: {key: dict(cells) for key, cells in typed[group].get(ds, {}).items() if (ds, key) in keys}
             for ds in datasets} if group else {}
    corpus = "contexts" + (f"+{Path(settings.distractors).name}" if settings.distractors else "")
    data, data_sha = data_files(req, found)
    wall_s, load = round(context.wall_s, 1), load_text(context.load_start, context.load_end)
    if not req.run:  # --no-run only reads finished rows back: this command's time is not theirs
        wall_s, load = None, None
    model = model_name(spec) if uses_model else "retrieval"
    return ResultRecord(
        id=record_id(table, req, model, datasets, corpus), kind="table", table=table.name,
        title=f"{table.title} ({', '.join(datasets) or 'no data'}, {f'first {req.limit}' if req.limit else 'all'} "
              "questions; fractions)", reader=str(spec) if uses_model else None,
        datasets=datasets, corpus=corpus, rows=rows, published_group=group,
        published={ds: cells for ds, cells in shown.items() if cells}, claims=claims,
        provenance=Provenance(commit=git_commit(), command=context.command, model=str(spec) if uses_model else None,
                              model_sha256=model_sha256(spec) if uses_model else None, data=data,
                              data_sha256=data_sha, corpus=corpus, load=load, machine=machine(), wall_s=wall_s,
                              date=today()),
    )
