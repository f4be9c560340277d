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
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from dynrag.data import data_path
from dynrag.errors import ConfigError, DataError
from dynrag.io import read_json
from dynrag.registry import Options, Registry

# Where each dataset's dev file sits in a folder laid out like ../shared/data (`--data-dir`).
DEFAULT_FILES = {
    "hotpotqa": "hotpotqa/hotpot_dev_distractor_sample.json",
    "2wikimultihopqa": "2wikimultihopqa/dev_sample.json",
    "strategyqa": "strategyqa/strategyqa_train.json",  # DRAGIN's code evaluates on StrategyQA train
    "iirc": "iirc/dev.json",
    "musique": "musique/musique_ans_dev_sample.jsonl",
    "popqa": "popqa/popqa.jsonl",
}

# Run options every interleaving method gets here: the authors' loops have no retrieval or step cap
# (their token budget ends them), so ours are set out of the way.
UNCAPPED = {"k": 3, "max_retrievals": 100, "max_steps": 200}


@lru_cache(maxsize=1)
def published() -> dict[str, Any]:
    """The typed published numbers and released settings (``data/published.json``)."""
    path = data_path("published.json")
    return read_json(path, "published numbers")


@dataclass(frozen=True)
class RunSpec:
    """One run of a table: a row (``key``, ``label``) on one dataset."""

    dataset: str
    key: str  # the row's key in the published cells, and the run directory's name
    label: str
    method: str
    options: dict[str, Any]
    retriever: str | None = None  # None: the command's --retriever (or the method's default)
    model: str | None = None  # None: the command's --model (DeepRAG's rows name their checkpoints)
    baseline: str | None = None  # the key of the row whose run is this run's --baseline (same dataset)


@dataclass(frozen=True)
class Column:
    """A column group: our summary figure beside the published metric, and their difference."""

    title: str
    ours: str | None  # summary.json key ("a.b" for a nested one), or None when we have no such figure
    paper: str | None  # published metric key, or None when the paper gives none
    digits: int = 3


@dataclass
class Table:
    name: str
    title: str
    datasets: list[str]
    runs: list[RunSpec]
    columns: Callable[[str], list[Column]]  # per dataset
    published_cells: dict[str, dict[str, dict[str, float]]]  # dataset -> row key -> metric -> value
    paper_setting: str  # one line: what the published numbers were measured with
    scorer: str = "squad"
    notes: list[str] = field(default_factory=list)


TABLES: Registry[Callable[..., Table]] = Registry("table")

PaperModel = Literal["Llama2-13b-chat", "Llama2-7b-chat", "Vicuna-13b-v1.5"]


class DraginTableOptions(Options):
    paper_model: PaperModel = Field(
        "Llama2-13b-chat", description="whose released thresholds to use and whose published cells to compare"
    )


def dragin_runs(paper_model: str, datasets: list[str], keys: list[str]) -> list[RunSpec]:
    """DRAGIN's Table 2 runs with the authors' released settings for `paper_model` (see published.json)."""
    settings = published()["released_settings"]["dragin"]
    model = settings["models"][paper_model]
    runs = []
    for ds in datasets:
        budget = settings["generate_max_length"][ds]
        loop = {**UNCAPPED, "max_new_tokens": budget}
        # FLARE as DRAGIN's code runs it: retrieve when the sentence's mean (1 - p) exceeds h, mask
        # the tokens whose 1 - p exceeds h, i.e. mean p < 1 - h and p < 1 - h.
        flare_p = round(1.0 - model["flare_threshold"][ds], 6)
        by_key = {
            "direct": RunSpec(ds, "direct", "wo-RAG", "direct", {"max_new_tokens": budget}),
            "single": RunSpec(ds, "single", "SR-RAG", "single", {"max_new_tokens": budget, "k": 3}),
            # The released FL-RAG config names no window; 25 tokens is the paper's FL-RAG query length (§5.4).
            "fixed_length": RunSpec(ds, "fixed_length", "FL-RAG", "fixed_length",
                                    {**loop, "n": 25, "first_retrieval": True}),
            "fixed_sentence": RunSpec(ds, "fixed_sentence", "FS-RAG", "fixed_sentence",
                                      {**loop, "first_retrieval": True}),
            "flare": RunSpec(ds, "flare", "FLARE", "flare",
                             {**loop, "trigger": "mean", "theta": flare_p, "beta": flare_p}),
            "dragin": RunSpec(ds, "dragin", "DRAGIN", "dragin", {
                **loop, "variant": "reference", "theta": model["dragin_threshold"][ds],
                "query_words": model["dragin_query_words"][ds], "chunk_tokens": budget,
            }),
        }
        runs += [by_key[k] for k in keys]
    return runs


def _cells(table: str, group: str) -> dict[str, Any]:
    return published()["tables"][table]["cells"].get(group, {})


def _answer_columns(dataset: str) -> list[Column]:
    if dataset == "strategyqa":
        return [Column("accuracy", "accuracy", "accuracy")]
    return [Column("EM", "em", "em"), Column("F1", "f1", "f1")]


DRAGIN_DATASETS = ["2wikimultihopqa", "hotpotqa", "strategyqa", "iirc"]
PAPER_SETTING = "first 1,000 dev questions, BM25 over Wikipedia (100-word passages), top-3"


@TABLES.register("dragin-table2", DraginTableOptions, "DRAGIN Table 2: EM/F1 (StrategyQA accuracy) of six methods on four datasets")
def dragin_table2(options: DraginTableOptions) -> Table:
    keys = ["direct", "single", "fixed_length", "fixed_sentence", "flare", "dragin"]
    return Table(
        "dragin-table2", f"DRAGIN Table 2 ({options.paper_model})", DRAGIN_DATASETS,
        dragin_runs(options.paper_model, DRAGIN_DATASETS, keys), _answer_columns,
        _cells("dragin-table2", options.paper_model), f"{options.paper_model}, {PAPER_SETTING}", scorer="dragin",
        notes=[published()["tables"]["dragin-table2"]["source"]],
    )


@TABLES.register("dragin-table3", DraginTableOptions, "DRAGIN Table 3: retrieval calls per question of the four dynamic methods")
def dragin_table3(options: DraginTableOptions) -> Table:
    keys = ["fixed_length", "fixed_sentence", "flare", "dragin"]
    return Table(
        "dragin-table3", f"DRAGIN Table 3 ({options.paper_model})", DRAGIN_DATASETS,
        dragin_runs(options.paper_model, DRAGIN_DATASETS, keys),
        lambda ds: [Column("retrievals/question", "retrievals_per_question", "retrievals", 2)],
        _cells("dragin-table3", options.paper_model), f"{options.paper_model}, {PAPER_SETTING}", scorer="dragin",
        notes=[published()["tables"]["dragin-table3"]["source"]],
    )


class BestPracticeOptions(Options):
    dataset: Literal["hotpotqa", "2wikimultihopqa"] = Field(
        "hotpotqa", description="the multi-hop set to run (the paper averages five task families)"
    )


@TABLES.register("bestpractice-table11", BestPracticeOptions, "Best-practices Table 11: the module search, on a multi-hop set")
def bestpractice_table11(options: BestPracticeOptions) -> Table:
    ds = options.dataset
    rows = [
        ("no_classification", "no query classification", {}, None),
        ("classification", "+ query classification", {"classify": True}, None),
        ("hybrid_hyde", "Hybrid with HyDE retrieval", {"query_transform": "hyde"}, "hybrid"),
        ("repack_reverse", "Reverse repacking", {"repack": "reverse"}, None),
        ("balanced", "balanced-efficiency practice", {"preset": "balanced"}, None),
        ("best", "best-performance practice", {"preset": "best"}, None),
    ]
    runs = [RunSpec(ds, key, label, "single", {"k": 3, **opts}, retriever) for key, label, opts, retriever in rows]
    columns = [
        Column("EM", "em", None), Column("F1", "f1", None),
        Column("latency s/query", "seconds_per_question", "latency", 2),
        Column("paper avg", None, "avg"), Column("paper RAG score", None, "rag_score"),
    ]
    cells = _cells("bestpractice-table11", "paper").get("multihop", {})
    return Table(
        "bestpractice-table11", f"Best-practices Table 11 (our {ds})", [ds], runs, lambda _: columns, {ds: cells},
        "Llama2-7B-Chat fine-tuned, Milvus over 140k passages, five task families, up to 500 questions each",
        notes=[published()["tables"]["bestpractice-table11"]["source"]],
    )


DeepragPaperModel = Literal["Llama-3-8B", "Qwen-2.5-7B"]


class DeepragTableOptions(Options):
    paper_model: DeepragPaperModel = Field("Llama-3-8B", description="whose published cells to compare")
    imitation: str | None = Field(None, description="model spec of a stage-I checkpoint (dynrag train imitation)")
    calibration: str | None = Field(None, description="model spec of a stage-II checkpoint (dynrag train calibration)")


def deeprag_runs(options: DeepragTableOptions, datasets: list[str]) -> list[RunSpec]:
    """DeepRAG's comparison: CoT (closed book), CoT-Retrieve (one retrieval), FLARE and DRAGIN at
    their defaults, and deeprag untrained (our worked examples) and, when given, trained."""
    runs = []
    for ds in datasets:
        runs += [
            RunSpec(ds, "cot", "CoT (direct)", "direct", {}),
            RunSpec(ds, "cot_retrieve", "CoT-Retrieve (single)", "single", {"k": 3}, baseline="cot"),
            RunSpec(ds, "flare", "FLARE", "flare", {"k": 3}, baseline="cot"),
            RunSpec(ds, "dragin", "DRAGIN", "dragin", {"k": 3}, baseline="cot"),
            RunSpec(ds, "deeprag_untrained", "deeprag untrained (ours only)", "deeprag", {"k": 3}, baseline="cot"),
        ]
        if options.imitation:
            runs.append(RunSpec(ds, "deeprag_imi", "DeepRAG-Imi", "deeprag", {"k": 3}, model=options.imitation,
                                baseline="cot"))
        if options.calibration:
            runs.append(RunSpec(ds, "deeprag", "DeepRAG", "deeprag", {"k": 3}, model=options.calibration,
                                baseline="cot"))
    return runs


DEEPRAG_SETTING = "BM25 over Wikipedia, first 1,000 questions"


@TABLES.register("deeprag-table1", DeepragTableOptions, "DeepRAG Table 1: EM/F1 of reasoning, adaptive and DeepRAG methods")
def deeprag_table1(options: DeepragTableOptions) -> Table:
    datasets = ["hotpotqa", "2wikimultihopqa", "popqa", "musique"]  # CAG and WebQuestions: no reader here
    return Table(
        "deeprag-table1", f"DeepRAG Table 1 ({options.paper_model})", datasets, deeprag_runs(options, datasets),
        lambda ds: [Column("EM", "em", "em"), Column("F1", "f1", "f1")],
        _cells("deeprag-table1", options.paper_model), f"{options.paper_model}, trained on 4,000 + 1,000 HotpotQA and "
        f"2Wiki train questions each, {DEEPRAG_SETTING}",
        notes=[published()["tables"]["deeprag-table1"]["source"]],
    )


@TABLES.register("deeprag-table3", DeepragTableOptions, "DeepRAG Table 3: knowledge-boundary figures on 2WikiMultihopQA")
def deeprag_table3(options: DeepragTableOptions) -> Table:
    columns = [Column("F1", "knowledge_boundary.f1", "f1"), Column("Acc", "knowledge_boundary.accuracy", "accuracy"),
               Column("Balanced Acc", "knowledge_boundary.balanced_accuracy", "balanced_accuracy"),
               Column("MCC", "knowledge_boundary.mcc", "mcc"),
               Column("retrievals/question", "retrievals_per_question", None, 2)]
    return Table(
        "deeprag-table3", "DeepRAG Table 3 (knowledge boundary against CoT)", ["2wikimultihopqa"],
        deeprag_runs(options, ["2wikimultihopqa"]), lambda _: columns,
        _cells("deeprag-table3", "paper"), f"Llama-3-8B (as Table 1), {DEEPRAG_SETTING}; both: CoT is the "
        "no-retrieval run, the positive class is 'did not retrieve' / 'the CoT answer was right' (eval/boundary.py)",
        notes=[published()["tables"]["deeprag-table3"]["source"]],
    )


# -- running -------------------------------------------------------------------------------------


@dataclass
class ReproduceRequest:
    table: str
    options: dict[str, Any] = field(default_factory=dict)  # the table's options (KEY=VALUE values)
    limit: int | None = None
    model: str = "bundled"
    retriever: str | None = None
    retriever_options: list[str] = field(default_factory=list)
    corpus: str = "contexts"
    data: dict[str, Path] = field(default_factory=dict)  # dataset -> file
    data_dir: Path | None = None
    out: Path = Path("runs/reproduce")
    datasets: list[str] | None = None  # only these of the table's datasets
    rows: list[str] | None = None  # only these rows (run keys, e.g. dragin)
    run: bool = True  # False: resolve data and show what would run, and the published numbers


def open_table(name: str, options: dict[str, Any] | None = None) -> Table:
    return TABLES.open(name, options or {})


def find_data(table: Table, req: ReproduceRequest) -> tuple[dict[str, Path], dict[str, str]]:
    """(dataset -> file for those found, dataset -> why not for the rest)."""
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
        elif req.data_dir is not None and (Path(req.data_dir) / DEFAULT_FILES[ds]).is_file():
            found[ds] = Path(req.data_dir) / DEFAULT_FILES[ds]
        else:
            where = f" or put it at {Path(req.data_dir) / DEFAULT_FILES[ds]}" if req.data_dir else " or --data-dir DIR"
            missing[ds] = f"no data: give --data {ds}=PATH{where}"
    return found, missing


def _slug(text: str) -> str:
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
    return Path(req.out) / _slug(setting) / spec.dataset / f"{spec.key}-{digest}-n{req.limit or 'all'}"


def reproduce(req: ReproduceRequest, console=None, progress: bool = True, method_factory=None) -> dict[str, Any]:
    """Run (or resume) every run of the table that has data; returns what `render` prints.

    ``method_factory`` is the eval runner's (tests pass a fast stand-in)."""
    from rich.console import Console

    from dynrag.config import load_run_config
    from dynrag.eval.runner import run_eval
    from dynrag.run.plan import make_plan

    console = console or Console(stderr=True)
    if req.limit is not None and req.limit < 1:
        raise ConfigError(f"--limit must be at least 1 (got {req.limit})")
    table = open_table(req.table, req.options)
    found, missing = find_data(table, req)
    for ds, why in missing.items():
        console.print(f"[yellow]{ds}: {why}; its rows are left out[/yellow]")
    results: dict[tuple[str, str], dict[str, Any] | None] = {}
    keys = list(dict.fromkeys(s.key for s in table.runs))
    bad = sorted(set(req.rows or []) - set(keys))
    if bad:
        raise ConfigError(f"--row {bad[0]!r}: table {table.name!r} has rows {', '.join(keys)}")
    todo = [s for s in table.runs if s.dataset in found and (req.rows is None or s.key in req.rows)]
    by_key = {(s.dataset, s.key): s for s in table.runs}
    wanted = {(s.dataset, s.baseline) for s in todo if s.baseline} | {(s.dataset, s.key) for s in todo}
    # a row's baseline runs before it, once
    todo = [s for s in table.runs if (s.dataset, s.key) in wanted and s.dataset in found]
    baselines = {s.baseline for s in table.runs if s.baseline}
    todo.sort(key=lambda s: s.key not in baselines)  # stable: table order otherwise
    for i, spec in enumerate(todo, 1):
        out = run_dir(req, spec)
        console.print(f"[bold]run {i}/{len(todo)}[/bold] {spec.dataset} {spec.label}: {out}")
        if not req.run:
            results[(spec.dataset, spec.key)] = _existing_summary(out)
            continue
        flags = dict(
            dataset=spec.dataset, data=found[spec.dataset], method=spec.method, out=out, corpus=req.corpus,
            limit=req.limit, model=spec.model or req.model, options=dict(spec.options),
            retriever=spec.retriever or req.retriever, scorer=table.scorer, workers=1,
            baseline=run_dir(req, by_key[(spec.dataset, spec.baseline)]) if spec.baseline else None,
        )
        plan = make_plan(load_run_config(None, flags, retriever_pairs=list(req.retriever_options)), command="eval")
        results[(spec.dataset, spec.key)] = run_eval(
            plan, method_factory=method_factory, console=console, progress=progress
        )
    shown = [ds for ds in table.datasets if ds in found or ds in missing]
    return {"table": table, "results": results, "missing": missing, "request": req, "datasets": shown}


def _existing_summary(out: Path) -> dict[str, Any] | None:
    path = out / "summary.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def _figure(summary: dict[str, Any], key: str) -> float | None:
    value: Any = summary
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value if isinstance(value, (int, float)) else None


def _fmt(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _delta(ours: float | None, paper: float | None, digits: int) -> str:
    return "–" if ours is None or paper is None else f"{ours - paper:+.{digits}f}"


def render(report: dict[str, Any]) -> str:
    """Markdown: per dataset, our figure, the published one and the difference, cell by cell."""
    table: Table = report["table"]
    req: ReproduceRequest = report["request"]
    results = report["results"]
    from dynrag.lm.loader import resolve_model

    lines = [
        f"# {table.title}: ours beside the published numbers",
        "",
        f"Ours: model `{resolve_model(req.model)}`, retriever {req.retriever or 'default (bm25; hybrid for presets)'}, "
        f"corpus {req.corpus}, first {req.limit or 'all'} questions, scorer {table.scorer}. "
        f"Paper: {table.paper_setting}. Δ = ours − paper.",
    ]
    for ds in report.get("datasets", table.datasets):
        specs = [s for s in table.runs if s.dataset == ds]
        cols = table.columns(ds)
        lines += ["", f"## {ds}", ""]
        if ds in report["missing"]:
            typed = "published numbers only" if table.published_cells.get(ds) else "its published cells are not typed here either"
            lines += [f"_{report['missing'][ds]}_: {typed}.", ""]
        header = ["method"]
        for c in cols:
            header += [f"{c.title} ours"] if c.ours else []
            header += [f"{c.title} paper"] if c.paper else []
            header += [f"{c.title} Δ"] if c.ours and c.paper else []
        lines += ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
        n_seen = set()
        for spec in specs:
            summary = results.get((ds, spec.key))
            if summary:
                n_seen.add(summary.get("n"))
            paper_row = table.published_cells.get(ds, {}).get(spec.key, {})
            row = [spec.label]
            for c in cols:
                ours = _figure(summary, c.ours) if (summary and c.ours) else None
                paper = paper_row.get(c.paper) if c.paper else None
                row += [_fmt(ours, c.digits)] if c.ours else []
                row += [_fmt(paper, c.digits)] if c.paper else []
                row += [_delta(ours, paper, c.digits)] if c.ours and c.paper else []
            lines.append("| " + " | ".join(row) + " |")
        if n_seen - {None}:
            lines += ["", f"Our questions: {', '.join(str(n) for n in sorted(n_seen - {None}))}."]
    lines += ["", *(f"Source: {n}" for n in table.notes)]
    return "\n".join(lines) + "\n"
