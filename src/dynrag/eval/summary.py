"""Per-question prediction records and the run summary recomputed from them (pure functions)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dynrag.datasets.formats import Dataset
from dynrag.datasets.loaders import QAExample, passage_key
from dynrag.datasets.metrics import Scorer, score_answer
from dynrag.datasets.step_decisions import step_decisions
from dynrag.eval.chain import chain_fields, chain_summary, hop_count

# The figures summarize() computes; summary.json adds method/model/dataset and run notes.
METRIC_KEYS = (
    "n",
    "em",
    "f1",
    "precision",
    "recall",
    "accuracy",
    "retrievals_per_question",
    "generated_tokens_per_question",
    "seconds_per_question",
    "cut_answers",
    "support_recall",
    "support_all",
)


def make_record(
    example: QAExample, answer: Mapping[str, Any], seconds: float, yes_no: bool, scorer: Scorer | None = None,
    dataset: Dataset | None = None,
) -> dict[str, Any]:
    """One predictions.jsonl line from an example and a method's ``Answer.to_dict()``; ``scorer``
    (default: SQuAD-style :func:`score_answer`) decides the recorded EM/F1; ``dataset``'s
    decision scoring, when it has one, adds its fields."""
    retrievals = answer.get("retrievals") or []
    support = set(example.supporting)
    retrieved_ids: list[str] = []
    found: set[str] = set()
    context_words = 0  # what the model was given to read, after any compression
    for r in retrievals:
        for hit in r.get("hits") or []:
            retrieved_ids.append(str(hit["id"]))
            context_words += len(str(hit.get("text") or "").split())
            # Pooled contexts carry the support ids themselves; any other index is matched by content.
            for key in (str(hit["id"]), passage_key(hit.get("title") or "", hit.get("text") or "")):
                if key in support:
                    found.add(key)
    final = answer.get("final_answer") or ""
    prediction = answer.get("answer") or ""
    s = scorer(final, prediction, example.answers) if scorer else score_answer(final, prediction, example.answers, yes_no)
    return {
        "id": example.id,
        "question": example.question,
        "answers": example.answers,
        "prediction": prediction,
        "final_answer": final,
        "scored_answer": s.scored,
        "em": s.em,
        "f1": round(s.f1, 6),
        "precision": round(s.precision, 6),
        "recall": round(s.recall, 6),
        "retrievals": len(retrievals),
        "queries": [r.get("query", "") for r in retrievals],
        "retrieved_ids": list(dict.fromkeys(retrieved_ids)),
        "context_words": context_words,
        "support": list(example.supporting),
        "support_found": [s_id for s_id in example.supporting if s_id in found],
        "generated_tokens": int(answer.get("generated_tokens") or 0),
        "kept_tokens": int(answer.get("kept_tokens", answer.get("generated_tokens")) or 0),
        "seconds": round(seconds, 3),
        **({"cut": answer["cut"]} if answer.get("cut") else {}),
        **chain_fields(answer, hop_count(example.hops, example.decomposition, example.supporting)),
        # a method that writes sub-questions (deeprag): each with its retrieve decision (DeepRAG's Figure 7)
        **({"decisions": decisions} if (decisions := step_decisions(answer.get("steps"))) else {}),
        **(dataset.decisions.record_fields(example, answer) if dataset and dataset.decisions else {}),
    }


def _ratio(num: float, den: float) -> float | None:
    return round(num / den, 6) if den else None


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 6) if values else 0.0


def _mean_or_none(values: list[float]) -> float | None:
    return _mean(values) if values else None


def summarize(
    predictions: Iterable[Mapping[str, Any]],
    dataset_has_support: bool,
    yes_no: bool,
    meta: Mapping[str, Any] | None = None,
    scorer: Scorer | None = None,
    dataset: Dataset | None = None,
) -> dict[str, Any]:
    """summary.json figures from prediction records; answers are re-scored (by ``scorer``, default
    SQuAD-style), not read back; ``dataset``'s decision scoring, when it has one, adds its block."""
    preds = list(predictions)

    def score(p: Mapping[str, Any]):
        final, text, golds = p.get("final_answer") or "", p.get("prediction") or "", list(p["answers"])
        return scorer(final, text, golds) if scorer else score_answer(final, text, golds, yes_no)

    scores = [score(p) for p in preds]
    with_support = [p for p in preds if p.get("support")]
    support_recall = support_all = None
    if dataset_has_support and with_support:
        fractions = [len(set(p["support_found"]) & set(p["support"])) / len(set(p["support"])) for p in with_support]
        support_recall = _mean(fractions)
        support_all = _mean([float(f == 1.0) for f in fractions])
    summary: dict[str, Any] = {
        "n": len(preds),
        "em": _mean([s.em for s in scores]),
        "f1": _mean([s.f1 for s in scores]),
        "precision": _mean([s.precision for s in scores]),
        "recall": _mean([s.recall for s in scores]),
        "accuracy": _mean([s.em for s in scores]) if yes_no else None,
        "retrievals_per_question": _mean([float(p["retrievals"]) for p in preds]),
        # Split by exact match (DeepRAG's Table 2): None when no answer falls on that side.
        "retrievals_when_correct": _mean_or_none([float(p["retrievals"]) for p, s in zip(preds, scores) if s.em == 1.0]),
        "retrievals_when_incorrect": _mean_or_none([float(p["retrievals"]) for p, s in zip(preds, scores) if s.em != 1.0]),
        "generated_tokens_per_question": _mean([float(p["generated_tokens"]) for p in preds]),
        # Decoded tokens per kept token: the cost of generating text that is later thrown away.
        "decoded_per_kept": _ratio(
            sum(float(p["generated_tokens"]) for p in preds),
            sum(float(p.get("kept_tokens", p["generated_tokens"])) for p in preds),
        ),
        "seconds_per_question": _mean([float(p["seconds"]) for p in preds]),
        # Answers stopped by a decoding budget (methods/iterative.py): a runaway is counted, not hidden.
        "cut_answers": sum(1 for p in preds if p.get("cut")),
        # Whether answers write a chain a trigger could interrupt (eval/chain.py).
        **chain_summary(preds),
        # Records written before this figure existed lack it: then there is no mean to give.
        "context_words_per_question": (_mean([float(p["context_words"]) for p in preds])
                                       if preds and all("context_words" in p for p in preds) else None),
        "support_recall": support_recall,
        "support_all": support_all,
    }
    if dataset is not None and dataset.decisions is not None:  # a generated world (docs/world.md)
        summary[dataset.decisions.summary_key] = dataset.decisions.summary_figures(preds, [(s.em, s.f1) for s in scores])
    summary.update(meta or {})
    return summary


def _fmt(value: Any, pct: bool = False) -> str:
    if value is None:
        return "–"
    if pct:
        return f"{100 * value:.1f}"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def world_lines(rd: Mapping[str, Any]) -> list[str]:
    """summary.md's lines on a generated world's retrieval decisions (docs/world.md)."""
    lines = [
        "",
        f"## Retrieval decisions ({rd['n']} questions with ground truth, {rd['need_retrieval']} need retrieval)",
        "",
        f"Did not retrieve against \"no hop unknown\": TP {rd['tp']}, FP {rd['fp']}, FN {rd['fn']}, TN {rd['tn']}; "
        f"accuracy {_fmt(rd['accuracy'], True)} %, balanced accuracy {_fmt(rd['balanced_accuracy'], True)} %, "
        f"MCC {rd['mcc']:.3f}.",
        f"Retrievals per question: {_fmt(rd.get('retrievals_all_known'))} on all-known questions, "
        f"{_fmt(rd.get('retrievals_needs_retrieval'))} on those that need retrieval.",
    ]
    eq = rd.get("entity_queries") or {}
    if eq.get("queries"):
        lines.append(f"Queries naming an unknown hop's entity: {eq['naming_unknown']} of {eq['queries']} "
                     f"({_fmt(eq['share'], True)} %).")
    hop = rd.get("per_hop")
    if hop:
        lines.append(f"Per hop (retrieved against unknown, {hop['matched']} matched): TP {hop['tp']}, FP {hop['fp']}, "
                     f"FN {hop['fn']}, TN {hop['tn']}; precision {_fmt(hop['precision'], True)} %, recall "
                     f"{_fmt(hop['recall'], True)} %, MCC {hop['mcc']:.3f}; {hop['extra_decisions']} extra decisions, "
                     f"{hop['missing_decisions']} hops without one.")
    return lines


def summary_markdown(summary: Mapping[str, Any]) -> str:
    """summary.md: the figures as a small markdown document."""
    lines = [
        f"# {summary.get('method', '?')} on {summary.get('dataset', '?')}",
        "",
        f"Model `{summary.get('model', '?')}`, {summary['n']} questions.",
        "",
        "| metric | value |",
        "| --- | --- |",
        f"| EM (%) | {_fmt(summary['em'], True)} |",
        f"| F1 (%) | {_fmt(summary['f1'], True)} |",
        f"| precision (%) | {_fmt(summary['precision'], True)} |",
        f"| recall (%) | {_fmt(summary['recall'], True)} |",
        f"| accuracy (%, yes/no) | {_fmt(summary['accuracy'], True)} |",
        f"| retrievals / question | {_fmt(summary['retrievals_per_question'])} |",
        f"| generated tokens / question | {_fmt(summary['generated_tokens_per_question'])} |",
        f"| seconds / question | {_fmt(summary['seconds_per_question'])} |",
        f"| wall seconds in all (every session) | {_fmt(summary.get('wall_seconds'))} |",
        f"| answers cut by the decoding budget | {summary.get('cut_answers', 0)} |",
        f"| reasoning sentences / answer | {_fmt(summary.get('reasoning_sentences_per_answer'))} |",
        f"| multi-hop answers with a sentence per hop (%) | {_fmt(summary.get('sentence_per_hop_share'), True)} "
        f"(of {summary.get('multi_hop_answers', 0)}) |",
        f"| retrievals after the first sentence / question | "
        f"{_fmt(summary.get('retrievals_after_first_sentence_per_question'))} |",
        f"| supporting-paragraph recall (%) | {_fmt(summary['support_recall'], True)} |",
        f"| all supporting paragraphs retrieved (%) | {_fmt(summary['support_all'], True)} |",
    ]
    kb = summary.get("knowledge_boundary")
    if kb:
        lines += [
            "",
            f"## Knowledge boundary (against `{kb.get('baseline', '?')}`, {kb['n']} questions)",
            "",
            "Did not retrieve (retrievals = 0) against \"the direct answer was right\" (its EM = 1), the paper's positive class:",
            f"TP {kb['tp']}, FP {kb['fp']}, FN {kb['fn']}, TN {kb['tn']}.",
            "",
            "| F1 (%) | accuracy (%) | balanced accuracy (%) | MCC |",
            "| --- | --- | --- | --- |",
            f"| {_fmt(kb['f1'], True)} | {_fmt(kb['accuracy'], True)} | {_fmt(kb['balanced_accuracy'], True)} "
            f"| {kb['mcc']:.3f} |",
        ]
    if summary.get("retrieval_decisions"):
        lines += world_lines(summary["retrieval_decisions"])
    notes = [f"{k.replace('_', ' ')}: {summary[k]}" for k in ("skipped_records", "excluded_records") if summary.get(k)]
    if notes:
        lines += ["", *(f"- {n}" for n in notes)]
    return "\n".join(lines) + "\n"
