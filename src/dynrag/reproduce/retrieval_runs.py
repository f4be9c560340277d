"""`dynrag reproduce` for a retrieval-only table: per dataset, the corpus each row searches (built
once per shape, reused by every row and every rerun), one `dynrag eval-retrieval` run directory per
row (a finished row is read back, not rerun), and the figures scored from its rankings.

Layout under ``--out``: ``retrieval/corpora/<dataset>/<own|distractors-HASH>/<shape>/`` holds a
corpus (``corpus.json`` with the documents' word spans, ``index/`` with its dense part once a dense
row ran), shared by every table; ``retrieval/<table>/<dataset>/n<limit>/<model>/`` one directory
per row.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from dynrag.datasets.examples import make_passage
from dynrag.errors import ConfigError, DynragError
from dynrag.io.files import atomic_write_json, atomic_write_text
from dynrag.io.jsonl import json_line, read_jsonl
from dynrag.registry import parse_model
from dynrag.retrieval.transform_registry import writes_text
from dynrag.reproduce.retrieval_tables import (
    CorpusShape, RetrievalRow, RetrievalTable, RetrievalTableOptions, chunk_span, covered_within, mean_scores, ranking_scores,
)
from dynrag.reproduce.runs import ReproduceRequest, check_rows, find_data

CORPUS_FORMAT = "dynrag-reproduce-corpus/1"
# The loader of each dataset a retrieval table may read (when it is not the dataset's own name).
LOADERS = {"nq": "jsonl"}


def reproduce_retrieval(table: RetrievalTable, req: ReproduceRequest, console, progress: bool) -> dict[str, Any]:
    """Run (or read back) every row of ``table`` on every dataset found; returns what ``render_retrieval`` prints."""
    from dynrag.eval.steps import load_questions

    if req.limit is not None and req.limit < 1:
        raise ConfigError(f"--limit must be at least 1 (got {req.limit})")
    keys = [row.key for row in table.rows]
    check_rows(req.rows, keys, table.name)  # before the notes below: a typo in --row is the whole answer
    if req.limit is None and table.default_limit is not None:
        console.print(f"{table.name}: the first {table.default_limit} questions of each dataset (its default; --limit N for more)")
        req = req.model_copy(update={"limit": table.default_limit})
    wanted = set(req.rows or keys)
    wanted |= {row.first_stage for row in table.rows if row.key in wanted and row.first_stage}  # reranked rows need theirs
    rows = [row for row in table.rows if row.key in wanted]
    settings = parse_model(RetrievalTableOptions, req.options, f"reproduce {table.name} --option")
    distractors, reading = settings.distractors, table.reads and settings.reader
    found, missing = find_data(table, req)  # type: ignore[arg-type]  (it reads .name and .datasets)
    for ds, why in missing.items():
        console.print(f"[yellow]{ds}: {why}; its rows are left out[/yellow]")
    results: dict[tuple[str, str], dict[str, Any] | None] = {}
    started, cpu_started = time.perf_counter(), time.process_time()
    for ds, data in found.items():
        # The corpus pools every question's paragraphs, whatever --limit is: a quick look searches
        # the same corpus as the full run and only asks fewer questions.
        pool, _ = load_questions(LOADERS.get(ds, ds), data, console)
        if not any(ex.supporting for ex in pool[: req.limit]):
            missing[ds] = "no question of it names a supporting passage"
            continue
        corpora = Path(req.out) / "retrieval" / "corpora" / ds / (_digest_of(distractors) if distractors else "own")
        base = Path(req.out) / "retrieval" / table.name / ds / f"n{req.limit or 'all'}" / _setting(req, distractors)
        for i, row in enumerate(rows, 1):
            corpus = _corpus(corpora / row.corpus.key(), pool, row.corpus, distractors, progress)
            out = base / f"{row.key}-{_digest(row)}"
            console.print(f"[bold]row {i}/{len(rows)}[/bold] {ds} {row.label}: {out}")
            try:
                if not req.run:
                    summary = _existing(out, row)
                elif row.rerank != "none":
                    summary = _rerank(row, base, corpora, pool, out, req, console, progress)
                else:
                    summary = _run_row(row, ds, data, corpora, out, table, req, console, progress)
            except DynragError as exc:  # e.g. an embedding model not installed: the other rows still run
                console.print(f"[yellow]{ds} {row.label}: {exc}[/yellow]")
                results[(ds, row.key)] = {"error": str(exc).splitlines()[0]}
                continue
            if summary is not None:
                summary = {**summary, **_scores(out, corpus, table)}
                if reading:
                    if req.run:
                        _read(row, ds, data, corpora, out, req, settings.reader_k, console, progress)
                    _add_reader_scores(summary, out / "reader")
            results[(ds, row.key)] = summary
    cost = {"seconds": time.perf_counter() - started, "cpu_seconds": time.process_time() - cpu_started}
    return {"table": table, "results": results, "missing": missing, "request": req, "found": list(found), "cost": cost,
            "settings": settings, "data": found}


def _setting(req: ReproduceRequest, distractors: str | None) -> str:
    """The part of a row's identity that comes from the command: the model writing query texts and
    any distractor passages pooled in."""
    from dynrag.lm.loader import resolve_model
    from dynrag.reproduce.runs import slug

    return slug(resolve_model(req.model)) + (f"+{_digest_of(distractors)}" if distractors else "")


def _digest_of(path: str) -> str:
    return "distractors-" + hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:6]


def _digest(row: RetrievalRow) -> str:
    blob = json.dumps(_row_identity(row), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:6]


# ---- corpora ----------------------------------------------------------------------------------------


def _corpus(directory: Path, examples: list, shape: CorpusShape, distractors: str | None, progress: bool) -> dict[str, Any]:
    """The corpus of one shape: its passages (pooled paragraphs, or one document per question) and
    where each gold paragraph lies in its document; built once, then read back."""
    from dynrag.corpus.readers import read_passages
    from dynrag.eval.pool import pool_contexts
    from dynrag.retrieval.index_build import build_index
    from dynrag.text.chunking import parse_chunk_spec

    manifest_path = directory / "corpus.json"
    spec = parse_chunk_spec(shape.chunk)
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if manifest.get("format") == CORPUS_FORMAT and manifest.get("questions") == [ex.id for ex in examples] \
                and (directory / "index" / "manifest.json").exists() and (directory / "passages.jsonl").exists():
            return manifest
    if shape.documents:
        passages, spans = _documents(examples)
    else:
        passages, spans = pool_contexts(examples), {}
    if distractors:
        seen = {p.id for p in passages}
        for p in read_passages(distractors):
            extra = make_passage(p.title, p.text)
            if extra.id not in seen:
                seen.add(extra.id)
                passages.append(extra)
    directory.mkdir(parents=True, exist_ok=True)
    # Reranking rows read passages by id; the index holds chunks, this file what was chunked.
    atomic_write_text(directory / "passages.jsonl", "".join(json_line(p.to_dict()) for p in passages))
    build_index(passages, directory / "index", chunk=spec if spec.kind != "none" else None, progress=progress,
                total=len(passages))
    manifest = {
        "format": CORPUS_FORMAT, "shape": shape.key(), "chunk": str(spec), "documents": shape.documents,
        "passages": len(passages), "questions": [ex.id for ex in examples], "spans": spans,
        "size": spec.large if spec.kind == "small-to-big" else spec.size, "overlap": spec.overlap,
    }
    atomic_write_json(manifest_path, manifest)
    return manifest


def _documents(examples: list) -> tuple[list, dict[str, dict[str, Any]]]:
    """One document per question: its context paragraphs joined in their order (titles inline, so a
    chunk keeps them); ``spans`` gives each document's words and each paragraph's word span in it."""
    from dynrag.corpus.passage import Passage

    documents, spans = [], {}
    for ex in examples:
        words: list[str] = []
        parts = {}
        for p in ex.contexts:
            start = len(words)
            words += f"{p.title}: {p.text}".split()
            parts[p.id] = [start, len(words)]
        doc_id = f"doc-{ex.id}"
        documents.append(Passage(doc_id, ex.contexts[0].title if ex.contexts else doc_id, " ".join(words)))
        spans[doc_id] = {"words": len(words), "parts": parts}
    return documents, spans


# ---- rows -------------------------------------------------------------------------------------------


def _run_row(row: RetrievalRow, ds: str, data: Path, corpora: Path, out: Path, table: RetrievalTable,
             req: ReproduceRequest, console, progress: bool) -> dict[str, Any]:
    from dynrag.config import load_run_config
    from dynrag.eval.retrieval_run import run_retrieval_eval
    from dynrag.run.plan import make_plan

    done = _existing(out, row)
    if done is not None:
        console.print("  finished earlier: read back")
        return done
    index = corpora / row.corpus.key() / "index"
    options = dict(row.options)
    if row.corpus.embedding_model is not None and _embeds(row.retriever):
        options.setdefault("embedding_model", row.corpus.embedding_model)
    flags: dict[str, Any] = dict(
        dataset=LOADERS.get(ds, ds), data=data, out=out, retriever=row.retriever, corpus=str(index),
        limit=req.limit, model=req.model, cutoffs=[table.depth], retriever_options=_numpy_bm25(row.retriever, options),
    )
    if writes_text(row.query_transform):
        flags.update(query_transform=row.query_transform, **row.transform_options)
        flags["hyde_cache"] = out.parent / "query-texts.jsonl"  # shared by the rows that write the same texts
    plan = make_plan(load_run_config(None, flags), command="eval-retrieval")
    summary = run_retrieval_eval(plan, console, progress)
    atomic_write_json(out / "row.json", {"row": _row_identity(row)})
    return summary


def _rerank(row: RetrievalRow, base: Path, corpora: Path, pool: list, out: Path, req: ReproduceRequest, console,
            progress: bool) -> dict[str, Any]:
    from dynrag.reproduce.rerank_rows import rerank_row

    done = _existing(out, row)
    if done is not None:
        console.print("  finished earlier: read back")
        return done
    stage = _stage_dir(base, row.first_stage)
    summary = rerank_row(row, stage, corpora / row.corpus.key() / "passages.jsonl", {ex.id: ex.question for ex in pool},
                         out, req.model, console, progress)
    atomic_write_json(out / "row.json", {"row": _row_identity(row)})
    return summary


def _stage_dir(base: Path, key: str | None) -> Path:
    """The finished directory of the row whose ranking a reranking row reorders."""
    found = [d for d in base.glob(f"{key}-*") if (d / "row.json").exists() and (d / "rankings.jsonl").exists()]
    if not key or len(found) != 1:
        raise ConfigError(f"reranking needs the finished first-stage row {key!r} under {base}")
    return found[0]


def _read(row: RetrievalRow, ds: str, data: Path, corpora: Path, out: Path, req: ReproduceRequest, k: int, console,
          progress: bool) -> None:
    """The reader (`single`, --model) answering from the row's top hits over the row's corpus: an
    ordinary eval run directory under the row's, resumed like any."""
    from dynrag.config import load_run_config
    from dynrag.eval.runner import run_eval
    from dynrag.run.plan import make_plan

    options = _numpy_bm25(row.retriever, dict(row.options))
    flags = dict(dataset=LOADERS.get(ds, ds), data=data, method="single", out=out / "reader",
                 corpus=str(corpora / row.corpus.key() / "index"), limit=req.limit, model=req.model,
                 options={"k": k}, retriever=row.retriever, workers=1)
    pairs = [f"{key}={value}" for key, value in options.items()]
    run_eval(make_plan(load_run_config(None, flags, retriever_pairs=pairs), command="eval"), console=console,
             progress=progress)


def _add_reader_scores(summary: dict[str, Any], reader_dir: Path) -> None:
    """The reader's EM/F1, overall and per question, from its finished eval run (when there is one)."""
    try:
        done = json.loads((reader_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    summary["table_scores"].update(em=done["em"], f1=done["f1"])
    for record in read_jsonl(reader_dir / "predictions.jsonl"):
        summary["question_scores"].setdefault(record["id"], {}).update(em=record["em"], f1=record["f1"])


def _embeds(retriever: str) -> bool:
    from dynrag.retrieval.factory import RETRIEVERS

    return "embedding_model" in RETRIEVERS.get(retriever).options.model_fields


def _numpy_bm25(retriever: str, options: dict[str, Any]) -> dict[str, Any]:
    """A pooled corpus is small: bm25s's numpy backend searches it in milliseconds, where numba's
    first compile would cost seconds in every row."""
    key = {"bm25": "backend", "hybrid": "bm25_backend"}.get(retriever)
    return {key: "numpy", **options} if key else options


def _row_identity(row: RetrievalRow) -> dict[str, Any]:
    identity = {"retriever": row.retriever, "options": row.options, "corpus": row.corpus.key(),
                "query_transform": row.query_transform, "transform_options": row.transform_options}
    if row.rerank != "none":
        identity.update(rerank=row.rerank, candidates=row.candidates, first_stage=row.first_stage)
    return identity


def _existing(out: Path, row: RetrievalRow) -> dict[str, Any] | None:
    """A finished row's summary when its directory holds this very row (else None: it runs again)."""
    try:
        marker = json.loads((out / "row.json").read_text(encoding="utf-8"))
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return summary if marker.get("row") == json.loads(json.dumps(_row_identity(row))) else None


def _scores(out: Path, corpus: dict[str, Any], table: RetrievalTable) -> dict[str, Any]:
    """The table's figures from a row's rankings: each hit covers itself, or (documents) the gold
    paragraphs at least half inside its chunk."""
    keys = [m.key for m in table.ours() if m.key and not m.reader]
    spans, size, overlap = corpus.get("spans") or {}, corpus.get("size"), corpus.get("overlap") or 0
    parts = {doc: {k: tuple(v) for k, v in span["parts"].items()} for doc, span in spans.items()}  # once, not per hit
    per_question, ids = [], []
    for record in read_jsonl(out / "rankings.jsonl"):
        ranked, gold = record["ranked"], record["gold"]
        if spans:
            covers, words = [], []
            for hit in ranked:
                doc, span = chunk_span(hit, spans[hit.partition("#")[0]]["words"], size or 1 << 30, overlap)
                covers.append(covered_within(span, parts[doc]))
                words.append(span[1] - span[0])
        else:
            covers, words = [{hit} for hit in ranked], [0] * len(ranked)  # words@K is a chunk tables' figure
        per_question.append(ranking_scores(covers, gold, words, keys))
        ids.append(record["id"])
    return {"table_scores": mean_scores(per_question), "question_scores": dict(zip(ids, per_question))}

