"""The world's files as bytes (pure): ``corpus.jsonl``, ``entities.jsonl``, ``facts.jsonl`` and
the ``train``/``dev``/``test`` splits as MuSiQue-like records, which the ``musique`` and ``world``
dataset loaders read with ``QAExample.decomposition`` filled.

A record: ``{id, question, answer, answer_aliases, answerable, paragraphs [{idx, title,
paragraph_text, is_supporting}], question_decomposition [{id, question, answer,
paragraph_support_idx, entity, fact, real, known}], world {kind, hops, chain, needs_retrieval}}``.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict
from typing import Any

from dynrag.world.articles import WorldPassage, write_articles
from dynrag.world.entities import World, WorldOptions, generate
from dynrag.world.knowledge import Knowledge, needs_retrieval
from dynrag.world.questions import SPLITS, Question, make_questions

FORMAT_VERSION = 2  # 2: the split shares are options (a version-1 world was split 0.6 / 0.2 / 0.2)
DISTRACTOR_PARAGRAPHS = 4  # other passages beside the supporting ones in each record


def jsonl_bytes(records: list[Any]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records).encode("utf-8")


def question_record(world: World, q: Question, qid: str, knowledge: Knowledge,
                    passages: list[WorldPassage], support: dict[str, int]) -> dict[str, Any]:
    rng = random.Random(f"{world.options.seed}:{qid}")
    gold = list(dict.fromkeys(support[f.id] for f in q.hops))
    others = [i for i in range(len(passages)) if i not in gold]
    chosen = gold + rng.sample(others, min(DISTRACTOR_PARAGRAPHS, len(others)))
    rng.shuffle(chosen)
    position = {p: i for i, p in enumerate(chosen)}
    by_id = world.by_id
    hops = []
    for k, (fact, sub) in enumerate(zip(q.hops, q.subquestions), 1):
        hops.append({"id": k, "question": sub, "answer": fact.value, "paragraph_support_idx": position[support[fact.id]],
                     "entity": by_id[fact.subject].name, "fact": fact.id, "real": fact.real,
                     "known": knowledge.known(fact)})
    chain = [q.hops[0].subject] + [f.object for f in q.hops if f.object is not None]
    if q.kind == "comparison":
        chain = [f.subject for f in q.hops]
    return {
        "id": qid, "question": q.question, "answer": q.answers[0], "answer_aliases": list(q.answers[1:]),
        "answerable": True,
        "paragraphs": [{"idx": i, "title": passages[p].title, "paragraph_text": passages[p].text,
                        "is_supporting": p in gold} for i, p in enumerate(chosen)],
        "question_decomposition": hops,
        "world": {"kind": q.kind, "hops": len(q.hops), "chain": chain,
                  "needs_retrieval": needs_retrieval([h["known"] for h in hops])},
    }


def build_files(options: WorldOptions, knowledge: Knowledge) -> dict[str, bytes]:
    """Every file of the world except the manifest, name -> bytes."""
    world = generate(options)
    passages, support = write_articles(world)
    questions = make_questions(world, knowledge)
    splits: dict[str, list[dict[str, Any]]] = {name: [] for name in SPLITS}
    for n, q in enumerate(questions, 1):
        qid = f"w{options.seed}-{q.split}-{n:04d}"
        splits[q.split].append(question_record(world, q, qid, knowledge, passages, support))
    files = {
        "corpus.jsonl": jsonl_bytes([{"id": p.id, "title": p.title, "text": p.text} for p in passages]),
        "entities.jsonl": jsonl_bytes([asdict(e) for e in world.entities]),
        "facts.jsonl": jsonl_bytes([{**asdict(f), "aliases": list(f.aliases), "known": knowledge.known(f),
                                "passage": passages[support[f.id]].id} for f in world.facts]),
    }
    for name, records in splits.items():
        # Mixed kinds and hop counts in file order, so `--limit N` takes a bit of everything.
        random.Random(f"dynrag-world-order:{options.seed}:{name}").shuffle(records)
        files[f"{name}.jsonl"] = jsonl_bytes(records)
    return files


def counts(files: dict[str, bytes]) -> dict[str, int]:
    return {name.removesuffix(".jsonl"): data.count(b"\n") for name, data in sorted(files.items())}
