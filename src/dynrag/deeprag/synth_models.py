"""What a synthesis loads: the target, an optional teacher and hop reader, and the retriever;
and the same models behind batching engines when questions are searched together."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from dynrag.datasets.loaders import QAExample
from dynrag.deeprag.teachers import teacher_kind
from dynrag.eval.steps import corpus_index
from dynrag.lm.base import LanguageModel
from dynrag.methods.deeprag.writer import NarrativeWriter, narrative_for
from dynrag.retrieval.base import Retriever


def writer_for(lm: LanguageModel, shots: int | None, style: str | None = None) -> NarrativeWriter:
    return NarrativeWriter(lm, narrative_for(lm, shots, style))  # type: ignore[arg-type]


@dataclass
class Models:
    """What a synthesis needs loaded; tests pass their own."""

    target: LanguageModel
    teacher: LanguageModel | None
    retriever: Retriever
    hop_reader: LanguageModel | None = None


def load_models(config: dict[str, Any], examples: list[QAExample], out: Path, console: Console, progress: bool) -> Models:
    from dynrag.lm import load_lm
    from dynrag.run.assemble import open_plan_retriever
    from dynrag.run.plan import search_retriever

    index_dir = corpus_index(config["corpus"], out, examples, console, progress)
    choice = search_retriever(config["retriever"], config["retriever_options"])
    retriever = open_plan_retriever(choice, index_dir, work_dir=out, progress=progress)
    teacher = None
    if teacher_kind(config["teacher"]) == "model" and config["teacher"] != config["model"]:
        console.print(f"loading teacher {config['teacher']} ...")
        teacher = load_lm(config["teacher"], progress=progress)
    console.print(f"loading target {config['model']} ...")
    target = load_lm(config["model"], progress=progress)
    reader = config.get("hop_reader")
    hop_reader = None
    if reader is not None:
        if reader == config["model"]:
            hop_reader = target
        elif teacher is not None and reader == config["teacher"]:
            hop_reader = teacher
        else:
            console.print(f"loading hop reader {reader} ...")
            hop_reader = load_lm(reader, progress=progress)
    return Models(target, teacher, retriever, hop_reader)


def batched_models(models: Models, batch: int) -> Models:
    """The models behind batching engines, so ``batch`` questions can be searched at once."""
    from dynrag.lm.batching import BatchingLM

    engines: dict[int, LanguageModel] = {}

    def engine(lm: LanguageModel | None) -> LanguageModel | None:
        if lm is None:
            return None
        if id(lm) not in engines:  # one engine per model, however many roles it plays
            engines[id(lm)] = BatchingLM(lm, max_rows=batch)
        return engines[id(lm)]

    return Models(engine(models.target), engine(models.teacher), models.retriever, engine(models.hop_reader))
