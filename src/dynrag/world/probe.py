"""The probe: what a model knows of the real-fact bank, asked closed book in three phrasings.

Each phrasing is one greedy generation after a few worked examples of our own (on subjects the bank
leaves out); its answer is the first line, cut at a comma, compared by normalised exact match.
Every answer is appended to ``probe-<model>.jsonl`` as it comes, so a killed probe resumes where
it stopped; the verdicts (``knowledge.verdict``) go to ``knowledge-<model>.json``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Sequence

from pydantic import Field
from rich.console import Console

from dynrag.datasets.metrics import exact_match
from dynrag.io.files import atomic_write_json
from dynrag.io.jsonl import JsonlAppender, read_jsonl
from dynrag.lm.chat import ChatFrame
from dynrag.methods.prompting import chat_frame
from dynrag.progress import progress_bar
from dynrag.world.bank import BY_ID, RealFact, phrasings
from dynrag.world.entities import WorldOptions, generate
from dynrag.world.knowledge import VERDICTS, Knowledge, verdict
from dynrag.world.make import check_world_out, knowledge_path, make_world, model_tag
from dynrag.run.jobs import JOBS, JobTraits, OutputGroup

EXEMPLARS = (
    ("What is the capital of Japan?", "Tokyo"),
    ("Who wrote The Raven?", "Edgar Allan Poe"),
    ("What is the chemical symbol for gold?", "Au"),
    ("On which continent is Kenya?", "Africa"),
    ("Which river flows through Baghdad?", "Tigris"),
)
INSTRUCTION = "Answer each question with a short answer."
MAX_NEW_TOKENS = 8


def closed_book_prompt(question: str, frame: ChatFrame | None = None) -> str:
    shots = "".join(f"Question: {q}\nAnswer: {a}\n\n" for q, a in EXEMPLARS)
    return in_style(frame, INSTRUCTION, f"{shots}Question: {question}")


def in_style(frame: ChatFrame | None, instruction: str, body: str) -> str:
    """Plain text ending in "Answer:", or, for a model prompted in the chat style (``frame``,
    methods.prompting.chat_frame), the instruction as the system message, the body as the user's,
    and "Answer:" opening the reply. Without that opener a small chat model answers in a sentence,
    or answers an exemplar's question again."""
    if frame is None:
        return f"{instruction}\n\n{body}\nAnswer:"
    return f"{frame.head}{instruction}{frame.between}{body}{frame.tail}Answer:"


def short_answer(text: str) -> str:
    """The answer in a generation: its first line, cut at a comma or semicolon, without a final stop
    or an "Answer:" label (a chat model may repeat the exemplars' label)."""
    line = re.sub(r"^answer\s*:", "", text.strip().split("\n", 1)[0], flags=re.IGNORECASE)
    for mark in (",", ";"):
        line = line.split(mark, 1)[0]
    return line.strip().rstrip(".").strip()


def is_correct(generated: str, answers: Sequence[str]) -> bool:
    """Normalised exact match of the short answer, or of it without a plural "s" ("Rupees")."""
    answer = short_answer(generated)
    singular = answer[:-1] if answer.lower().endswith("s") and len(answer) > 3 else answer
    return bool(exact_match(answer, answers) or exact_match(singular, answers))


def ask(lm: Any, prompt: str, max_new_tokens: int = MAX_NEW_TOKENS) -> str:
    return lm.generate(prompt, max_new_tokens, stop=("\n",)).text


def _valid(record: Any) -> str | None:
    if not isinstance(record, dict) or not isinstance(record.get("fact"), str) or not isinstance(record.get("phrasing"), int):
        return "expected a probe answer {fact, phrasing, question, prediction, correct}"
    return None


def run_probe(lm: Any, facts: Sequence[RealFact], log: Path, console: Console, progress: bool = True,
              max_new_tokens: int = MAX_NEW_TOKENS,
              phrase: Callable[[RealFact], Sequence[str]] = phrasings) -> dict[tuple[str, int], dict[str, Any]]:
    """Ask every phrasing of ``facts`` not yet in ``log`` (``phrase``: a fact's three questions,
    the bank's by default); return all answers by (fact id, phrasing)."""
    done = {(r["fact"], r["phrasing"]): r for r in read_jsonl(log, repair=True, validate=_valid)}
    todo = [(f, i, q) for f in facts for i, q in enumerate(phrase(f)) if (f.id, i) not in done]
    total = sum(len(phrase(f)) for f in facts)
    if todo and total > len(todo):
        console.print(f"probe: resuming, {total - len(todo)} of {total} questions already answered")
    with JsonlAppender(log) as out, progress_bar("probe", total, total - len(todo), console, progress,
                                                 unit="questions") as bar:
        right = sum(1 for r in done.values() if r.get("correct"))  # answered before a restart too
        for fact, i, question in todo:
            prediction = ask(lm, closed_book_prompt(question, chat_frame(lm)), max_new_tokens)
            record = {"fact": fact.id, "phrasing": i, "question": question, "prediction": prediction,
                      "correct": is_correct(prediction, fact.answers)}
            out.append(record)
            done[(fact.id, i)] = record
            right += record["correct"]
            bar.advance(stats=f"right {right}")
    return done


def knowledge_record(model: str, facts: Sequence[RealFact], answers: dict[tuple[str, int], dict[str, Any]]) -> dict[str, Any]:
    """The contents of ``knowledge-<model>.json``."""
    out: dict[str, Any] = {}
    for fact in facts:
        rows = [answers[(fact.id, i)] for i in range(3)]
        # Scored again from the saved generation: a corrected alias needs no second probe.
        correct = [is_correct(r["prediction"], fact.answers) for r in rows]
        out[fact.id] = {"verdict": verdict(correct), "answer": fact.answer,
                        "predictions": [short_answer(r["prediction"]) for r in rows]}
    tally = {v: sum(1 for r in out.values() if r["verdict"] == v) for v in VERDICTS}
    return {"format_version": 1, "model": model, "counts": tally, "facts": out}


def probe_world(lm: Any, model: str, facts: Sequence[RealFact], world: Path, console: Console,
                progress: bool = True, max_new_tokens: int = MAX_NEW_TOKENS) -> dict[str, Any]:
    """Probe ``facts`` (resuming from the world's probe log) and write ``knowledge-<model>.json``."""
    log = Path(world) / f"probe-{model_tag(model)}.jsonl"
    answers = run_probe(lm, facts, log, console, progress, max_new_tokens)
    record = knowledge_record(model, facts, answers)
    atomic_write_json(knowledge_path(world, model), record)
    return record


def make_probed(options: WorldOptions, out: Path, model: str | None, max_new_tokens: int, console: Console,
                progress: bool = True) -> dict[str, Any]:
    """``world make``: probe ``model`` on the world's real facts (none without a model), then write
    the world; returns its manifest."""
    check_world_out(out)  # before the probe writes its log into it
    knowledge = Knowledge()
    if model is not None:
        from dynrag.lm.loader import load_lm

        facts = [BY_ID[f.id] for f in generate(options).facts if f.real]
        record = probe_world(load_lm(model, progress=progress), model, facts, out, console, progress, max_new_tokens)
        knowledge = Knowledge(model, {k: v["verdict"] for k, v in record["facts"].items()})
    return make_world(options, out, knowledge)


class WorldMakeJobOptions(OutputGroup):
    """The `world make` job's options: the world's sizes and seed, and the model probed first."""

    options: WorldOptions = Field(default_factory=WorldOptions, description="the world's seed and sizes")
    model: str | None = Field(None, description="the model probed on the real facts (None: they stay unprobed)")
    max_new_tokens: int = Field(8, description="tokens per probe answer")


def make_job(job: WorldMakeJobOptions, *, console: Console, progress: bool = True) -> dict[str, Any]:
    return make_probed(job.options, job.out, job.model, job.max_new_tokens, console, progress)


# A killed probe resumes from its log; the world itself is the same bytes for the same seed and sizes,
# written in place, so the job holds no lock.
JOBS.add("world make", make_job, WorldMakeJobOptions, summary="a generated world, probed on a model's knowledge",
         traits=JobTraits(lock="none", loop="own"))
