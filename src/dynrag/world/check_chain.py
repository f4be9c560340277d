"""``world check --chains``: does the reader write the chain? Dev's multi-hop questions (bridges of
two hops or more, comparisons) asked in the prompt the iterative methods build for ``--dataset
world``, with the passages of the hops the model does not know among one other passage of the
record (as a retrieval would bring them; ``world/chain_text.py``), decoded greedily to the end of
the line.

The figure that matters for FLARE and DRAGIN is ``sentence_per_hop``: the share of these answers
that write at least one reasoning sentence per hop (``eval/chain.py``, the same count an eval run's
summary gives), since a trigger can only act on a sentence that is written. EM of the answer after
the answer phrase is reported beside it.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console

from dynrag.datasets.metrics import exact_match
from dynrag.eval.chain import hop_count, reasoning_sentences
from dynrag.methods.prompting import ANSWER_STOPS, extract_answer
from dynrag.progress import progress_bar
from dynrag.world.chain_text import as_hits, chain_hops, is_chain, methods_builder, shown_passages
from dynrag.world.make import fact_relations

CHAIN_TOKENS = 128  # the iterative methods' default budget of answer tokens
OTHERS = 1  # passages beside the gold ones, so the reader has to pick


def chain_items(dev: Sequence[dict[str, Any]], relations: dict[str, str]) -> list[dict[str, Any]]:
    """(id, question, answers, hops, passages) of every multi-hop dev question, in dev's order."""
    items = []
    for record in dev:
        if not is_chain(record):
            continue
        rng = random.Random(f"dynrag-world-check-chain:{record['id']}")
        passages = shown_passages(record, chain_hops(record, relations), OTHERS, rng)
        items.append({"id": record["id"], "question": record["question"],
                      "answers": [record["answer"], *record.get("answer_aliases", [])],
                      "hops": hop_count(record["question_decomposition"], [], []), "passages": passages})
    return items


def run_chain_check(lm: Any, world: Path, dev: Sequence[dict[str, Any]], console: Console,
                    progress: bool = True) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the chain figures, one result per question)."""
    builder = methods_builder()
    items = chain_items(dev, fact_relations(world))
    results = []
    with progress_bar("chains", len(items), 0, console, progress, unit="questions") as bar:
        for item in items:
            prompt = builder.build(item["question"], as_hits(item["passages"]) or None, lm=lm,
                                   max_new_tokens=CHAIN_TOKENS)
            text = lm.generate(prompt, CHAIN_TOKENS, stop=ANSWER_STOPS).text
            answer = extract_answer(text, builder.answer_phrase)
            sentences = reasoning_sentences(text)
            results.append({"group": "chain", "id": item["id"], "question": item["question"],
                            "answers": item["answers"], "hops": item["hops"], "generated": text,
                            "prediction": answer, "sentences": sentences,
                            "sentence_per_hop": sentences >= item["hops"],
                            "correct": bool(answer is not None and exact_match(answer, item["answers"]))})
            bar.advance()
    return chain_summary(results), results


def chain_summary(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    n = len(results)
    return {
        "n": n,
        "sentence_per_hop": sum(r["sentence_per_hop"] for r in results) / n if n else None,
        "sentences_per_answer": sum(r["sentences"] for r in results) / n if n else None,
        "em": sum(r["correct"] for r in results) / n if n else None,
    }
