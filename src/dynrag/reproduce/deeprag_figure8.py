"""DeepRAG's Figure 8: the word classes of the sub-questions DeepRAG writes (WH-words, nouns, verbs,
coordinating conjunctions, and pronouns, which the paper's text names), counted by a real
part-of-speech tagger (text/pos.py), with the paper's reading tested: the trained model writes
atomic sub-questions, with fewer conjunctions and pronouns.

Two commands read the same lines: ``deeprag-figure8`` on Table 1's datasets (its deeprag rows and
the IterDRAG-style row, so a Table 1 run is read as it is) and ``world-figure8`` on a generated
world (the world table's deeprag rows, so a ``reproduce world`` run is read as it is).

The reading is tested per question, not per sub-question: sub-questions of one question are not
independent draws, so each question contributes the mean over its sub-questions, and two rows are
compared on the questions where both wrote one (paired permutation test). Against the question
itself, the question's own counts stand on the other side.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dynrag.reproduce.deeprag import DeepragTableOptions, table1_runs
from dynrag.reproduce.tables import TABLES, WIKIPEDIA_BM25, Column, RunSpec, Table, published, records_of
from dynrag.reproduce.world import DATASET as WORLD, WorldTableOptions, prepare as world_prepare, world_runs
from dynrag.reproduce.world_tests import paired_lower
from dynrag.text.pos import WORD_CLASSES, LinguaTagger, PartOfSpeechTagger, count_word_classes

DATASETS = ["hotpotqa", "2wikimultihopqa", "popqa", "musique"]
# Rows that write sub-questions, least trained first: the last one present is the one the
# paper's reading is about, compared with every other one and with the question itself.
DECOMPOSING = ("iterdrag", "deeprag_untrained", "deeprag_imi", "deeprag")
TESTED = ("conjunctions", "pronouns")  # the classes the paper's text says DeepRAG writes fewer of
CLASS_TITLES = {"wh_words": "WH-words", "nouns": "nouns", "verbs": "verbs", "conjunctions": "conjunctions (CC)",
                "pronouns": "pronouns"}
QUESTION = "the question itself"


def subquestions(record: dict[str, Any]) -> list[str]:
    """The sub-questions one prediction record wrote, in order (its ``decisions``)."""
    return [d["subquery"] for d in record.get("decisions") or [] if str(d.get("subquery") or "").strip()]


def per_question_means(records: list[dict[str, Any]], counts: dict[str, dict[str, int]]) -> dict[str, dict[str, float]]:
    """Question id -> class -> mean count over that question's sub-questions (questions with none left out)."""
    means = {}
    for r in records:
        subs = subquestions(r)
        if subs:
            means[str(r["id"])] = {c: float(np.mean([counts[s][c] for s in subs])) for c in WORD_CLASSES}
    return means


def row_means(texts: list[str], counts: dict[str, dict[str, int]]) -> dict[str, float]:
    """Class -> mean count per text (the figure's bars)."""
    return {c: float(np.mean([counts[t][c] for t in texts])) if texts else float("nan") for c in WORD_CLASSES}


def figure8_lines(rows: list[tuple[str, str, list[dict[str, Any]]]], tagger: PartOfSpeechTagger) -> list[str]:
    """The figure for one dataset's rows ((key, label, records) each) and its tested reading."""
    rows = [(k, label, recs) for k, label, recs in rows if recs]
    if not rows:
        return []
    questions = {str(r["id"]): r["question"] for r in rows[0][2]}
    texts = sorted({s for _, _, recs in rows for r in recs for s in subquestions(r)} | set(questions.values()))
    counts = {t: count_word_classes(tagged).as_dict() for t, tagged in zip(texts, tagger.tag_texts(texts))}

    header = ["row", "sub-questions", *[CLASS_TITLES[c] for c in WORD_CLASSES]]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    for _, label, recs in rows:
        subs = [s for r in recs for s in subquestions(r)]
        means = row_means(subs, counts)
        lines.append(f"| {label} | {len(subs)} | " + " | ".join(f"{means[c]:.2f}" for c in WORD_CLASSES) + " |")
    q_means = row_means(list(questions.values()), counts)
    lines.append(f"| {QUESTION} | {len(questions)} | " + " | ".join(f"{q_means[c]:.2f}" for c in WORD_CLASSES) + " |")

    _, label, recs = rows[-1]
    mine = per_question_means(recs, counts)
    others = [(other_label, per_question_means(other, counts)) for _, other_label, other in rows[:-1]]
    others.append((QUESTION, {q: {c: float(v) for c, v in counts[text].items()} for q, text in questions.items()}))
    lines += ["", f"The paper's reading, tested for {label} (per question: the mean over its sub-questions; "
              "paired permutation test on the questions both sides have):", ""]
    for other_label, theirs in others:
        shared = sorted(set(mine) & set(theirs))
        for c in TESTED:
            a = [mine[q][c] for q in shared]
            b = [theirs[q][c] for q in shared]
            t = paired_lower(a, b)
            shown = f"{np.mean(a):.2f} against {np.mean(b):.2f}" if shared else "no shared questions"
            lines.append(f"- Fewer {CLASS_TITLES[c]} per sub-question than {other_label}: {shown}, n {t.n} "
                         f"questions, p = {t.p:.3g}: **{t.verdict}**.")
    return lines


def figure_after(runs: list[RunSpec], results: dict[tuple[str, str], Any], tagger: PartOfSpeechTagger,
                 datasets: list[str]) -> list[str]:
    lines: list[str] = []
    for ds in datasets:
        rows = [(s.key, s.label, records_of(results.get((ds, s.key))) or []) for s in runs
                if s.dataset == ds and s.key in DECOMPOSING]
        rows.sort(key=lambda row: DECOMPOSING.index(row[0]))
        body = figure8_lines(rows, tagger)
        if body:
            lines += ["", f"#### {ds}: mean count per sub-question (Lingua::EN::Tagger, Penn tags)", "", *body]
    return lines


COLUMNS = [Column("EM", "em", None), Column("F1", "f1", None),
           Column("retrievals/question", "retrievals_per_question", None, 2)]


@TABLES.register("deeprag-figure8", DeepragTableOptions,
                 "DeepRAG Figure 8: WH-words, nouns, verbs, conjunctions and pronouns per sub-question")
def deeprag_figure8(options: DeepragTableOptions) -> Table:
    runs = [s for s in table1_runs(options, DATASETS) if not s.published_only and s.key in (*DECOMPOSING, "cot")]
    return Table(
        "deeprag-figure8", "DeepRAG Figure 8 (the words of sub-questions)", DATASETS, runs, lambda _: COLUMNS, {},
        "Llama-3-8B (as Table 1), BM25 over Wikipedia", paper_corpus=WIKIPEDIA_BM25,
        notes=[published()["tables"]["deeprag-figure8"]["source"]],
        after=lambda results: figure_after(runs, results, LinguaTagger(), DATASETS),
        carries_rows=False,  # its lines read each question's sub-questions
    )


@TABLES.register("world-figure8", WorldTableOptions,
                 "DeepRAG Figure 8 on a generated world: the words of the sub-questions of its deeprag rows")
def world_figure8(options: WorldTableOptions) -> Table:
    runs = [s for s in world_runs(options) if s.key in DECOMPOSING]
    return Table(
        "world-figure8", "DeepRAG Figure 8 on a generated world (test split)", [WORLD], runs, lambda _: COLUMNS, {},
        "no published numbers for a world; the reading tested is the paper's",
        notes=[published()["tables"]["world-figure8"]["source"]],
        prepare=world_prepare, after=lambda results: figure_after(runs, results, LinguaTagger(), [WORLD]),
        carries_rows=False,  # its lines read each question's sub-questions
    )
