"""The `synth` and `train` commands; dynrag.cli registers them through ``register``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, ContextManager, Optional

import typer
from rich.console import Console

DATASET_NAMES = "hotpotqa, 2wikimultihopqa, musique, strategyqa, iirc, popqa, jsonl, world"
MODEL_HELP = "bundled | bundled:NAME | hf:PATH_OR_ID[#FILE.gguf]"
TEACHER_HELP = "target (the target model, default) | dataset (gold decomposition: musique, strategyqa, 2wikimultihopqa, world) | a model spec"


def register(app: typer.Typer, user_errors: Callable[[], ContextManager[None]]) -> None:
    @app.command("synth")
    def synth_command(
        dataset: str = typer.Option(..., "--dataset", help=f"Benchmark format: {DATASET_NAMES}."),
        data: Path = typer.Option(..., "--data", help="The benchmark file (a train split: never the questions you evaluate on)."),
        out: Path = typer.Option(..., "--out", help="Output directory (created, or resumed when it exists)."),
        corpus: str = typer.Option("contexts", "--corpus", help="'contexts' (pool the questions' paragraphs) or an index directory."),
        model: str = typer.Option("bundled", "--model", help=f"Target model: {MODEL_HELP}."),
        teacher: Optional[str] = typer.Option(None, "--teacher", help=f"Who writes sub-questions and retrieved answers: {TEACHER_HELP}."),
        limit: Optional[int] = typer.Option(None, "--limit", help="Only N questions (after --skip)."),
        skip: int = typer.Option(0, "--skip", help="Leave out the first N questions of the file."),
        max_steps: Optional[int] = typer.Option(None, "--max-steps", help="T: most sub-questions in a narrative (default: the dataset's DeepRAG limit, 6 on HotpotQA, 10 elsewhere)."),
        max_retrievals: Optional[int] = typer.Option(None, "--max-retrievals", help="R: most retrievals in a narrative (default: the dataset's DeepRAG limit, 6 on HotpotQA, 10 elsewhere)."),
        max_nodes: Optional[int] = typer.Option(None, "--max-nodes", help="Most tree nodes expanded per question (default: the whole tree for T and R; a smaller budget cuts questions, counted in the summary)."),
        k: int = typer.Option(3, "--k", help="Passages per retrieval."),
        match: str = typer.Option("em", "--match", help="When a final answer is correct: em (normalised exact match) or f1:T."),
        shots: Optional[int] = typer.Option(None, "--shots", help="Worked examples in the target's prompt (default: all; 0 for a trained checkpoint)."),
        select: str = typer.Option("min", "--select", help="Which correct narrative to keep: min (fewest retrievals, the paper's) | max (most) | random (seeded by --seed); max and random search the whole tree."),
        seed: int = typer.Option(0, "--seed", help="Seed of --select random (each question's draw depends on it and the question id)."),
        batch: int = typer.Option(1, "--batch", min=1, help="Questions searched at once, their generations decoded together by one local model (not part of the output's identity)."),
        retriever: Optional[str] = typer.Option(None, "--retriever", help="bm25 (default) | dense | hybrid | milvus."),
        retriever_option: list[str] = typer.Option([], "--retriever-option", help="Retriever option KEY=VALUE (repeatable)."),
        aliases: Optional[Path] = typer.Option(None, "--aliases", help="2WikiMultihopQA answer alias file."),
        skip_bad: bool = typer.Option(False, "--skip-bad", help="Skip and count malformed records."),
        progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress."),
    ) -> None:
        """Binary tree search for a correct retrieval narrative of each question, the cheapest by default (DeepRAG stage I data)."""
        with user_errors():
            import json

            from dynrag.deeprag.synth import SynthRequest, run_synth

            req = SynthRequest(
                dataset=dataset, data=data, out=out, corpus=corpus, model=model, teacher=teacher, limit=limit,
                skip=skip, max_steps=max_steps, max_retrievals=max_retrievals, max_nodes=max_nodes, k=k, match=match, shots=shots,
                aliases=aliases, skip_bad=skip_bad, retriever=retriever, retriever_options=list(retriever_option),
                select=select, seed=seed, batch=batch,
            )
            summary = run_synth(req, console=Console(stderr=True), progress=progress)
            sys.stdout.write(json.dumps(summary, indent=2) + "\n")

    from dynrag.deeprag.train_cli import register_train

    train = typer.Typer(no_args_is_help=True, help="Training: DeepRAG imitation (stage I) and chain of calibration (stage II); reader fine-tuning (RAG best practices).")
    register_train(train, user_errors)
    app.add_typer(train, name="train")
