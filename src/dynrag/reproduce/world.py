"""`dynrag reproduce world --world DIR`: every method on a generated world's test split, retrieving
from the world's own corpus, with the decision figures a world makes possible and the claims of the
adaptive-retrieval papers decided by significance tests on the rows' per-question records
(reproduce/world_claims.py; each line computed from the runs, never typed).

The corpus is a BM25 index of ``DIR/corpus.jsonl``, built once under ``--out`` (named by the
corpus's sha256, so a rebuilt world gets a new index); ``--corpus INDEX_DIR`` replaces it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import Field

from dynrag.errors import ConfigError, DataError
from dynrag.reproduce.deeprag import deeprag_options
from dynrag.reproduce.world_claims import claim_lines
from dynrag.reproduce.tables import TABLES, Column, RunSpec, Table, published, records_of
from dynrag.registry import Options

DATASET = "world"
INDEX_DIR = "world-index"  # under --out: one BM25 index per world corpus (by its sha256)


class WorldTableOptions(Options):
    imitation: str | None = Field(None, description="model spec of a stage-I checkpoint (dynrag train imitation)")
    calibration: str | None = Field(None, description="model spec of a stage-II checkpoint (dynrag train calibration)")


def world_runs(options: WorldTableOptions) -> list[RunSpec]:
    """The rows: closed book, one retrieval, the fixed schedules, FLARE, both DRAGIN variants,
    deeprag untrained and, when given, its stage-I and stage-II checkpoints; top-3 throughout."""
    top = {"k": 3}
    runs = [
        RunSpec(DATASET, "direct", "direct (closed book)", "direct", {}),
        RunSpec(DATASET, "single", "single retrieval", "single", top),
        RunSpec(DATASET, "fixed_length", "FL-RAG", "fixed_length", {**top, "n": 25, "first_retrieval": True}),
        RunSpec(DATASET, "fixed_sentence", "FS-RAG", "fixed_sentence", {**top, "first_retrieval": True}),
        RunSpec(DATASET, "flare", "FLARE", "flare", top),
        RunSpec(DATASET, "dragin", "DRAGIN (paper variant)", "dragin", {**top, "variant": "paper"}),
        RunSpec(DATASET, "dragin_reference", "DRAGIN (reference variant)", "dragin", {**top, "variant": "reference"}),
        RunSpec(DATASET, "deeprag_untrained", "deeprag untrained", "deeprag", deeprag_options(DATASET)),
    ]
    if options.imitation:
        runs.append(RunSpec(DATASET, "deeprag_imi", "DeepRAG-Imi (stage I)", "deeprag", deeprag_options(DATASET),
                            model=options.imitation))
    if options.calibration:
        runs.append(RunSpec(DATASET, "deeprag", "DeepRAG (stage II)", "deeprag", deeprag_options(DATASET),
                            model=options.calibration))
    return runs


RD = "retrieval_decisions"
COLUMNS = [
    Column("EM", "em", None), Column("F1", "f1", None),
    Column("retrievals/question", "retrievals_per_question", None, 2),
    Column("r/q all known", f"{RD}.retrievals_all_known", None, 2),
    Column("r/q needs retrieval", f"{RD}.retrievals_needs_retrieval", None, 2),
    Column("queries naming an unknown entity", f"{RD}.entity_queries.share", None),
    Column("question MCC", f"{RD}.mcc", None),
    Column("hop precision", f"{RD}.per_hop.precision", None),
    Column("hop recall", f"{RD}.per_hop.recall", None),
    Column("hop MCC", f"{RD}.per_hop.mcc", None),
    Column("s/question", "seconds_per_question", None, 2),  # what each question cost, on this machine
    Column("cut answers", "cut_answers", None, 0),  # stopped by the decoding budget
    # whether the reader writes a chain a trigger could interrupt (eval/chain.py)
    Column("sentences/answer", "reasoning_sentences_per_answer", None, 2),
    Column("multi-hop: a sentence per hop", "sentence_per_hop_share", None),
    Column("retrievals after sentence 1", "retrievals_after_first_sentence_per_question", None, 2),
    Column("row wall s", "wall_seconds", None, 0),  # what the row cost, model loading included
]
GROUPS = [("hops_1", "1 hop"), ("hops_2", "2 hops"), ("hops_3", "3 hops"), ("all_known", "all known"),
          ("needs_retrieval", "needs retrieval"), ("known_and_unknown", "known and unknown hops")]


def world_index(world: Path, out: Path, build: bool) -> Path:
    """The BM25 index of the world's corpus under ``out``, built when ``build`` and not there yet."""
    corpus = world / "corpus.jsonl"
    if not corpus.is_file():
        raise DataError(str(corpus), "the world has no corpus (make it again with `dynrag world make --out DIR`)")
    path = out / INDEX_DIR / hashlib.sha256(corpus.read_bytes()).hexdigest()[:16]
    if build and not (path / "manifest.json").is_file():
        from dynrag.corpus import read_passages
        from dynrag.retrieval.index_build import build_index

        build_index(read_passages(corpus), path, progress=False)
    return path


def prepare(req: Any) -> Any:
    """The request with the world's test split as the data and its index as the corpus."""
    from dynrag.world.make import read_manifest

    if req.world is None:
        raise ConfigError(f"reproduce {req.table} needs --world DIR, a directory written by `dynrag world make --out DIR`")
    world = Path(req.world)
    if not world.is_dir():
        raise DataError(str(world), "--world: no such directory (make a world with `dynrag world make --out DIR`)")
    read_manifest(world)  # a clear error when DIR holds no world
    if req.data or req.data_dir is not None:
        raise ConfigError("--data/--data-dir: the world table reads DIR/test.jsonl of --world DIR; drop them")
    test = world / "test.jsonl"
    if not test.is_file():
        raise DataError(str(test), "the world has no test split (make it again with `dynrag world make --out DIR`)")
    corpus = str(world_index(world, Path(req.out), build=req.run)) if req.corpus == "contexts" else req.corpus
    return req.model_copy(update={"data": {DATASET: test}, "corpus": corpus})


def world_or(benchmarks: list[str]) -> Callable[[Any], Any]:
    """The ``prepare`` of a table that runs on a world or on benchmarks: with --world, the world's
    test split and corpus, and only it (one corpus serves every run of a reproduction); without,
    the benchmarks."""

    def prepare_either(req: Any) -> Any:
        wanted = req.datasets
        if req.world is not None:
            if wanted is not None and wanted != [DATASET]:
                raise ConfigError(f"--dataset {wanted[0]!r}: with --world, {req.table} runs on the world's test split only")
            return prepare(req).model_copy(update={"datasets": [DATASET]})
        if wanted is not None and DATASET in wanted:
            raise ConfigError(f"--dataset {DATASET}: give --world DIR, a directory written by `dynrag world make --out DIR`")
        return req.model_copy(update={"datasets": wanted or list(benchmarks)})

    return prepare_either


# ---- what is printed under the table ------------------------------------------------------------


def _get(summary: dict[str, Any] | None, *path: str) -> Any:
    value: Any = summary
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _f(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def breakdown(runs: list[RunSpec], results: dict[tuple[str, str], Any]) -> list[str]:
    """EM / retrievals per question of each row, per question group."""
    sizes: dict[str, int] = {}
    for spec in runs:
        for key, _ in GROUPS:
            n = _get(results.get((DATASET, spec.key)), RD, "groups", key, "n")
            if n is not None:
                sizes.setdefault(key, n)
    header = ["method"] + [f"{title} (n={sizes[key]})" if key in sizes else title for key, title in GROUPS]
    lines = ["", "### By question group: EM / retrievals per question", "",
             "| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    for spec in runs:
        cells = [spec.label]
        for key, _ in GROUPS:
            group = _get(results.get((DATASET, spec.key)), RD, "groups", key)
            cells.append("–" if not group else f"{_f(group['em'])} / {_f(group['retrievals_per_question'], 2)}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines + cost_lines(runs, results)


def cost_lines(runs: list[RunSpec], results: dict[tuple[str, str], Any]) -> list[str]:
    """What the rows took on the wall clock, summed (each row's sessions: loading included)."""
    walls = [_get(results.get((DATASET, s.key)), "wall_seconds") for s in runs if results.get((DATASET, s.key))]
    if not walls:
        return []
    timed = [w for w in walls if w is not None]
    untimed = len(walls) - len(timed)
    line = f"Wall time of the {len(timed)} timed rows: {sum(timed) / 60:.1f} min in all"
    if untimed:
        line += f" ({untimed} row(s) ran before runs recorded their wall time)"
    return ["", line + "."]


def claims(runs: list[RunSpec], results: dict[tuple[str, str], Any]) -> list[str]:
    """The claim lines (reproduce/world_claims.py), each decided by a test on the rows' records."""
    rows = {spec.key: records_of(results.get((DATASET, spec.key))) for spec in runs}
    return ["", "### Claims", "", *claim_lines(rows)]


@TABLES.register("world", WorldTableOptions, "every method on a generated world's test split, with per-decision figures and the papers' claims decided by tests")
def world_table(options: WorldTableOptions) -> Table:
    runs = world_runs(options)
    return Table(
        "world", "A generated world (test split)", [DATASET], runs, lambda _: COLUMNS, {},
        "no published numbers: the claims below come from the DRAGIN, FLARE and DeepRAG papers",
        notes=[published()["tables"]["world"]["source"]],
        remarks=["Multi-hop: two or three hops, comparisons included. Decision figures: question MCC takes "
                 "\"did not retrieve\" against \"no hop unknown\"; hop precision, recall and MCC take \"retrieved\" "
                 "against \"this hop's fact is unknown\" and exist only for methods that write sub-questions."],
        prepare=prepare, after=lambda results: breakdown(runs, results) + claims(runs, results),
        carries_rows=False,  # its lines read each question's hops and decisions
    )
