"""After ``world teach``: probe the taught model and write the world as that model knows it.

The probe asks every real fact of the world in the bank's three phrasings (what training may have
made the model forget) and every taught fact in the three phrasings of ``teach_text.PROBE``, plus
once in the world's own question phrasing (never trained, never part of the verdict: reported as
``held_out``). Answers go to ``OUT/world/probe-<model>.jsonl`` as they come (a killed probe
resumes), verdicts to ``OUT/world/knowledge-<model>.json`` with the taught facts among them.

``OUT/world`` is the taught world: the same corpus and questions as the original, with each hop's
``known`` (and each question's ``needs_retrieval``) set from the taught model's verdicts: known,
unknown, or null where the verdict is left out (right in some phrasings only: no ground truth).
Fictional facts that were not taught stay unknown. Its manifest names the model ``hf:OUT``, so
``world check --world OUT/world --model hf:OUT`` and ``eval --dataset world --data OUT/world/test.jsonl``
score against what the taught model knows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from rich.console import Console

from dynrag.io.files import atomic_write_bytes, atomic_write_json
from dynrag.io.jsonl import read_jsonl
from dynrag.lm.spec import ModelSpec
from dynrag.world.bank import BY_ID, RealFact
from dynrag.world.build import jsonl_bytes
from dynrag.world.entities import Fact, World
from dynrag.world.knowledge import VERDICTS, needs_retrieval
from dynrag.world.make import MANIFEST, base_verdicts, knowledge_path, model_tag, sha256
from dynrag.world.probe import is_correct, knowledge_record, run_probe, short_answer
from dynrag.world.questions import hop_question
from dynrag.world.teach_text import probe_questions

HELD_OUT = 3  # phrasing index of the world's own question in the probe log


def truth(verdict: str | None, real: bool) -> bool | None:
    """A hop's ``known`` from a verdict; a fictional fact without one (not taught) is unknown."""
    if verdict is None:
        return None if real else False
    return {"known": True, "unknown": False}.get(verdict)


def relabel(record: dict[str, Any], status: dict[str, str]) -> dict[str, Any]:
    """A question record with each hop's ``known`` and its ``needs_retrieval`` from ``status``."""
    hops = [{**h, "known": truth(status.get(h["fact"]), h["real"])} for h in record["question_decomposition"]]
    world = {**record["world"], "needs_retrieval": needs_retrieval([h["known"] for h in hops])}
    return {**record, "question_decomposition": hops, "world": world}


def write_taught_world(source: Path, dest: Path, manifest: dict[str, Any], spec: str, status: dict[str, str],
                       taught: Sequence[str]) -> dict[str, Any]:
    """The world of ``source`` relabelled for ``spec`` into ``dest``; manifest last. Returns it."""
    dest.mkdir(parents=True, exist_ok=True)
    files: dict[str, bytes] = {}
    for name in ("corpus.jsonl", "entities.jsonl"):
        files[name] = (source / name).read_bytes()
    files["facts.jsonl"] = jsonl_bytes([{**f, "known": truth(status.get(f["id"]), f["real"])}
                                   for f in read_jsonl(source / "facts.jsonl", whole=True)])
    for split in ("train", "dev", "test"):
        files[f"{split}.jsonl"] = jsonl_bytes([relabel(r, status) for r in read_jsonl(source / f"{split}.jsonl", whole=True)])
    for name, data in files.items():
        atomic_write_bytes(dest / name, data)
    digests = {name: sha256(data) for name, data in sorted(files.items())}
    kpath = knowledge_path(dest, spec)
    digests[kpath.name] = sha256(kpath.read_bytes())
    out = {**manifest, "model": spec, "sha256": digests,
           "taught": {"from": str(source), "base_model": manifest.get("model"), "facts": list(taught)}}
    atomic_write_json(dest / MANIFEST, out)
    return out


def reprobe_and_relabel(source: Path, manifest: dict[str, Any], world: World, taught: Sequence[Fact], out: Path,
                        console: Console, progress: bool, max_new_tokens: int) -> dict[str, Any]:
    """Probe ``hf:OUT`` and write ``OUT/world``; returns the figures of the taught facts."""
    from dynrag.lm.loader import load_lm

    spec = str(ModelSpec.for_path(out))
    dest = out / "world"
    names = {e.id: e.name for e in world.entities}
    real = [BY_ID[f.id] for f in world.facts if f.real]
    asked = {f.id: (*probe_questions(f, names[f.subject]), hop_question(f, names[f.subject])) for f in taught}
    facts = [RealFact(f.id, f.relation, names[f.subject], f.answers) for f in taught]
    lm = load_lm(spec, progress=progress)
    log = dest / f"probe-{model_tag(spec)}.jsonl"
    dest.mkdir(parents=True, exist_ok=True)
    answers = run_probe(lm, real, log, console, progress, max_new_tokens)
    answers |= run_probe(lm, facts, log, console, progress, max_new_tokens, phrase=lambda f: asked[f.id])
    record = knowledge_record(spec, real + facts, answers)
    held = {f.id: answers[(f.id, HELD_OUT)] for f in facts}
    for f in facts:
        row = held[f.id]
        record["facts"][f.id] |= {"taught": True, "held_out": {"question": row["question"],
                                  "prediction": short_answer(row["prediction"]),
                                  "correct": is_correct(row["prediction"], f.answers)}}
    base = base_verdicts(source, manifest)
    summary = {
        "taught": len(facts),
        "moved": sum(record["facts"][f.id]["verdict"] == "known" for f in facts),
        "taught_verdicts": {v: sum(record["facts"][f.id]["verdict"] == v for f in facts) for v in VERDICTS},
        "held_out_right": sum(record["facts"][f.id]["held_out"]["correct"] for f in facts),
        "real_known_before": sum(v == "known" for v in base.values()) if base else None,
        "real_known_after": sum(record["facts"][f.id]["verdict"] == "known" for f in real),
        "real_forgotten": sorted(fid for fid, v in base.items() if v == "known" and record["facts"][fid]["verdict"] != "known"),
    }
    record["teach"] = summary
    atomic_write_json(knowledge_path(dest, spec), record)
    status = {fid: r["verdict"] for fid, r in record["facts"].items()}
    write_taught_world(source, dest, manifest, spec, status, [f.id for f in taught])
    return summary


