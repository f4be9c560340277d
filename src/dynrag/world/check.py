"""``world check``: does the world control what the model knows? Three figures on dev's 1-hop
questions, each asked in the phrasing the probe never used:

- ``known``: closed-book EM on facts the probe found known (target >= 0.8);
- ``unknown``: closed-book EM on unknown facts, fictional and real (target <= 0.05);
- ``reading``: EM on the fictional facts with the gold passage in the prompt (target >= 0.8).

With ``chains``, also whether the model writes one sentence per hop on dev's multi-hop questions
in the methods' prompt (``world/check_chain.py``): what a ``world reader --style chain`` is for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from pydantic import Field
from rich.table import Table

from dynrag.errors import ConfigError, DataError
from dynrag.io.files import atomic_write_json
from dynrag.io.jsonl import read_jsonl
from dynrag.progress import progress_bar
from dynrag.world.entities import WorldOptions
from dynrag.world.make import model_tag
from dynrag.run.jobs import JOBS, JobTraits, ModelGroup
from dynrag.lm.chat import ChatFrame
from dynrag.methods.prompting import chat_frame
from dynrag.world.probe import MAX_NEW_TOKENS, ask, closed_book_prompt, in_style, is_correct, short_answer

TARGETS = {"known": (">=", 0.8), "unknown": ("<=", 0.05), "reading": (">=", 0.8)}
READING_EXEMPLARS = (
    ("Quillmarsh Ferries began carrying passengers across the bay in 1903. Its first captain was Odile Venn.",
     "Who was the first captain of Quillmarsh Ferries?", "Odile Venn"),
    ("The village of Harrowgate End sits where two brooks meet. It is known for its slate roofs.",
     "What is Harrowgate End known for?", "its slate roofs"),
    ("Mirela Dunst spent forty years as a ferryman on the Lowen estuary.",
     "What was the job of Mirela Dunst?", "ferryman"),
    ("Ostrey Glassworks keeps its furnaces in Carrow Vale. Ines Talbec set it up with two brothers.",
     "Who set up Ostrey Glassworks?", "Ines Talbec"),
)


READING_INSTRUCTION = "Answer each question from its passage with a short answer."


def reading_prompt(passage: str, question: str, frame: ChatFrame | None = None) -> str:
    shots = "".join(f"Passage: {p}\nQuestion: {q}\nAnswer: {a}\n\n" for p, q, a in READING_EXEMPLARS)
    return in_style(frame, READING_INSTRUCTION,
                    f"{shots}Passage: {passage}\nQuestion: {question}")


def check_items(dev: list[dict[str, Any]], frame: ChatFrame | None = None) -> list[dict[str, Any]]:
    """(group, question, answers, prompt) of every figure's question, in dev's order; prompts in
    the chat style with ``frame``."""
    items = []
    for record in dev:
        hops = record["question_decomposition"]
        if record["world"]["kind"] != "bridge" or len(hops) != 1 or hops[0]["known"] is None:
            continue
        hop = hops[0]
        answers = [record["answer"], *record.get("answer_aliases", [])]
        group = "known" if hop["known"] else "unknown"
        items.append({"group": group, "real": hop["real"], "id": record["id"], "question": record["question"],
                      "answers": answers, "prompt": closed_book_prompt(record["question"], frame)})
        if not hop["real"]:
            passage = record["paragraphs"][hop["paragraph_support_idx"]]["paragraph_text"]
            items.append({"group": "reading", "real": False, "id": record["id"], "question": record["question"],
                          "answers": answers, "prompt": reading_prompt(passage, record["question"], frame)})
    return items


def summarise(results: list[dict[str, Any]]) -> dict[str, Any]:
    groups: dict[str, Any] = {}
    for name, (op, target) in TARGETS.items():
        rows = [r for r in results if r["group"] == name]
        em = sum(r["correct"] for r in rows) / len(rows) if rows else None
        met = None if em is None else (em >= target if op == ">=" else em <= target)
        groups[name] = {"n": len(rows), "em": em, "target": f"{op} {target}", "met": met}
    real_unknown = [r for r in results if r["group"] == "unknown" and r["real"]]
    groups["unknown"]["n_real"] = len(real_unknown)
    return groups


def remake_command(world: Path, manifest: dict[str, Any], model: str) -> str:
    """The ``world make`` that makes ``world`` again, same seed and sizes, probed with ``model``."""
    defaults = WorldOptions().model_dump()
    sizes = "".join(f" --{k.replace('_', '-')} {v}" for k, v in manifest.get("options", {}).items()
                    if k != "seed" and defaults.get(k) != v)
    return f"dynrag world make --model {model} --out {world} --seed {manifest.get('seed')}{sizes}"


def check_probed(world: Path, manifest: dict[str, Any], model: str) -> None:
    """Refuse to check ``world`` with a model it was not probed with: its known/unknown labels are
    another model's verdicts, or, made without --model, nobody's (its real facts are unprobed)."""
    probed = manifest.get("model")
    if probed == model:
        return
    if probed is None:
        raise ConfigError(f"--world {world}: was made without --model, so its real facts were never probed "
                          f"(make it again probed with {model}: `{remake_command(world, manifest, model)}`)")
    raise ConfigError(f"--model {model}: {world} was probed with {probed}, not {model} (check it with --model "
                      f"{probed}, or make it again for {model}: `{remake_command(world, manifest, model)}`)")


def run_check(lm: Any, model: str, world: Path, console: Console, progress: bool = True,
              max_new_tokens: int = MAX_NEW_TOKENS, chains: bool = False) -> dict[str, Any]:
    dev_path = Path(world) / "dev.jsonl"
    if not dev_path.exists():
        raise DataError(str(dev_path), "no dev split (run `dynrag world make` first)")
    dev = read_jsonl(dev_path, whole=True)
    items = check_items(dev, chat_frame(lm))
    results = []
    with progress_bar("check", len(items), 0, console, progress, unit="questions") as bar:
        for item in items:
            generated = ask(lm, item["prompt"], max_new_tokens)
            results.append({k: v for k, v in item.items() if k != "prompt"} |
                           {"prediction": short_answer(generated), "correct": is_correct(generated, item["answers"])})
            bar.advance()
    report = {"model": model, "world": str(world), "groups": summarise(results), "items": results}
    if chains:
        from dynrag.world.check_chain import run_chain_check

        report["chains"], chain_results = run_chain_check(lm, Path(world), dev, console, progress)
        report["items"] += chain_results
    atomic_write_json(Path(world) / f"check-{model_tag(model)}.json", report)
    return report


def table(report: dict[str, Any]) -> Table:
    out = Table(title=f"world check: {report['model']}")
    for column in ("figure", "questions", "EM", "target", "met"):
        out.add_column(column)
    for name, g in report["groups"].items():
        em = "-" if g["em"] is None else f"{g['em']:.3f}"
        met = "-" if g["met"] is None else ("yes" if g["met"] else "no")
        out.add_row(name, str(g["n"]), em, g["target"], met)
    chains = report.get("chains")
    if chains:  # no target: a figure to read against the answer-style reader's
        for name, key in (("chain: sentence per hop", "sentence_per_hop"), ("chain: EM", "em")):
            value = "-" if chains[key] is None else f"{chains[key]:.3f}"
            out.add_row(name, str(chains["n"]), value, "-", "-")
    return out


class WorldCheckJobOptions(ModelGroup):
    """The `world check` job's options: the world (its report is written into it) and the model it
    was probed with."""

    world: Path = Field(description="a world made with --model")
    max_new_tokens: int = Field(MAX_NEW_TOKENS, description="tokens per answer")
    chains: bool = Field(False, description="also the share of multi-hop answers written a sentence per hop")


def check_job(job: WorldCheckJobOptions, *, console: Console, progress: bool = True) -> dict[str, Any]:
    from dynrag.lm.loader import load_lm
    from dynrag.world.make import read_manifest

    check_probed(job.world, read_manifest(job.world), job.model)
    lm = load_lm(job.model, progress=progress)
    return run_check(lm, job.model, job.world, console, progress, job.max_new_tokens, job.chains)


# It answers a few dev questions and writes one report file atomically: nothing to resume or lock.
JOBS.add("world check", check_job, WorldCheckJobOptions, summary="closed-book and reading EM of a model on its world",
         traits=JobTraits(lock="none", loop="own", resumable=False))
