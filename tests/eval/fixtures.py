"""Tiny benchmark files in each dataset's original format, written into a test's tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

HOTPOT = [
    {
        "_id": "h1",
        "question": "Which river flows through the town where the Velmora bridge stands?",
        "answer": "Rhone",
        "type": "bridge",
        "level": "hard",
        "supporting_facts": [["Velmora bridge", 0], ["Lyon", 1]],
        "context": [
            ["Velmora bridge", ["The Velmora bridge is a stone bridge in Lyon.", " It was built in 1887."]],
            ["Lyon", ["Lyon is a city in France.", " The Rhone flows through Lyon."]],
            ["Paris", ["Paris is the capital of France."]],
        ],
    },
    {
        "_id": "h2",
        "question": "Is Lyon a city in France?",
        "answer": "yes",
        "type": "comparison",
        "level": "easy",
        "supporting_facts": [["Lyon", 0]],
        # the same Lyon paragraph as in h1 (sentences split differently): pooled once
        "context": [["Lyon", ["Lyon is a city in France. ", "The Rhone flows through Lyon."]], ["Empty", []]],
    },
]

TWOWIKI = [
    {
        "_id": "w1",
        "type": "compositional",
        "question": "Who directed the film Harbour Mill?",
        "context": [["Harbour Mill", ["Harbour Mill is a 1950 film directed by Ana Petrova."]],
                    ["Ana Petrova", ["Ana Petrova was a Bulgarian director."]]],
        "supporting_facts": [["Harbour Mill", 0]],
        "evidences": [["Harbour Mill", "director", "Ana Petrova"]],
        "answer": "Ana Petrova",
        "answer_id": "Q42",
        "entity_ids": "Q1_Q42",
        "evidences_id": [],
    },
]

MUSIQUE = [
    {
        "id": "2hop__1_2",
        "question": "Who founded the school in the town on the north bank?",
        "answer": "Marie Lenoir",
        "answer_aliases": ["M. Lenoir"],
        "answerable": True,
        "paragraphs": [
            {"idx": 0, "title": "North School", "paragraph_text": "North School was founded by Marie Lenoir.", "is_supporting": True},
            {"idx": 1, "title": "Old Mill", "paragraph_text": "The old mill is on the south bank.", "is_supporting": False},
        ],
        "question_decomposition": [],
    },
]

STRATEGY = [
    {
        "qid": "s1",
        "term": "Velmora bridge",
        "description": "a bridge",
        "question": "Was the Velmora bridge built before 1900?",
        "answer": True,
        "facts": ["The Velmora bridge was built in 1887.", "1887 is before 1900."],
        "decomposition": ["When was it built?", "Is #1 before 1900?"],
        "evidence": [],
    },
    {"qid": "s2", "question": "Is Paris in Spain?", "answer": False, "facts": ["Paris is in France."]},
]

IIRC = [
    {
        "pid": "p1",
        "title": "Velmora bridge",
        "text": "The Velmora bridge is a stone bridge built by the engineer Jean Roux.",
        "links": [{"indices": [55, 64], "target": "Jean Roux"}],
        "questions": [
            {
                "qid": "q1",
                "question": "How old was the engineer when the bridge was built?",
                "answer": {"type": "value", "answer_value": "41", "answer_unit": "years"},
                "context": [
                    {"passage": "main", "text": "built by the engineer Jean Roux", "indices": [30, 60]},
                    {"passage": "Jean Roux", "text": "Jean Roux was born in 1846.", "indices": [0, 27]},
                ],
                "question_links": ["Jean Roux"],
            },
            {
                "qid": "q2",
                "question": "Who built the bridge?",
                "answer": {"type": "span", "answer_spans": [{"text": "Jean Roux ", "passage": "main", "type": "answer", "start": 55, "end": 64}]},
                "context": [{"passage": "main", "text": "built by the engineer Jean Roux", "indices": [30, 60]}],
            },
            {"qid": "q3", "question": "Is it red?", "answer": {"type": "none"}, "context": []},
            {"qid": "q4", "question": "Was Roux French?", "answer": {"type": "binary", "answer_value": "yes"}, "context": []},
        ],
    }
]

POPQA_TSV = (
    "id\tsubj\tprop\tobj\tsubj_id\tprop_id\tobj_id\ts_aliases\to_aliases\ts_uri\to_uri\ts_wiki_title\to_wiki_title\ts_pop\to_pop\tquestion\tpossible_answers\n"
    '101\tJean Roux\toccupation\tengineer\t1\t22\t3\t[]\t[]\tu\tu\tJean Roux\tEngineer\t10\t99\tWhat is Jean Roux\'s occupation?\t["engineer", "civil engineer"]\n'
    '102\tLyon\tcountry\tFrance\t4\t17\t5\t[]\t[]\tu\tu\tLyon\tFrance\t900\t999\tIn what country is Lyon?\t["France", "French Republic"]\n'
)

POPQA_JSONL = [
    {"question": "What is Jean Roux's occupation?", "answers": ["engineer"], "ctxs": [{"title": "Jean Roux", "text": "Jean Roux was an engineer."}]},
    {"id": "x2", "question": "In what country is Lyon?", "possible_answers": '["France"]'},
]

GENERIC = [
    {"id": "g1", "question": "Where does the Rhone flow?", "answers": ["Lyon", "through Lyon"]},
    {"id": 2, "question": "When was the Velmora bridge built?", "answer": "1887",
     "contexts": [{"title": "Velmora bridge", "text": "Built in 1887.", "supporting": True}, "A loose string context."]},
]


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_all(tmp_path: Path) -> dict[str, Path]:
    return {
        "hotpotqa": write_json(tmp_path / "hotpot.json", HOTPOT),
        "2wikimultihopqa": write_json(tmp_path / "2wiki.json", TWOWIKI),
        "musique": write_jsonl(tmp_path / "musique.jsonl", MUSIQUE),
        "strategyqa": write_json(tmp_path / "strategyqa.json", STRATEGY),
        "iirc": write_json(tmp_path / "iirc.json", IIRC),
        "popqa": _write_text(tmp_path / "popqa.tsv", POPQA_TSV),
        "jsonl": write_jsonl(tmp_path / "qa.jsonl", GENERIC),
    }


def _write_text(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def qa_rows(n: int) -> list[dict]:
    """n generic questions, each with two context paragraphs (one supporting)."""
    return [
        {
            "id": f"q{i}",
            "question": f"Which harbour town has the mill called mill{i}?",
            "answers": [f"town{i}"],
            "contexts": [
                {"title": f"Mill {i}", "text": f"The mill called mill{i} stands in the harbour town town{i}.", "supporting": True},
                {"title": "Harbour", "text": "Many harbour towns have a mill."},
            ],
        }
        for i in range(n)
    ]


def eval_plan(**keys):
    """The plan `dynrag eval` makes from these run configuration keys (as flags; retriever options
    may be KEY=VALUE strings), in one process unless ``workers`` says otherwise."""
    from dynrag.config import load_run_config
    from dynrag.registry import parse_pairs
    from dynrag.run.plan import make_plan

    keys.setdefault("workers", 1)
    given = keys.get("retriever_options")
    if isinstance(given, (list, tuple)):
        keys["retriever_options"] = parse_pairs(given, "--retriever-option")
    return make_plan(load_run_config(None, keys), command="eval")
