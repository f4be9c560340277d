"""The `synth` and `train` commands; dynrag.cli registers them through ``register``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, ContextManager, Optional

import typer
from rich.console import Console

from dynrag.run.flags import (
    aliases_flag, batch_flag, corpus_flag, data_flag, dataset_flag, limit_flag, model_flag, progress_flag,
    old_spelling, renamed, retriever_flag, retriever_option_flag, skip_bad_flag,
)

def _teacher_help() -> str:
    """The datasets a `dataset` teacher works on, read from the dataset registry's trait."""
    from dynrag.datasets.formats import DATASETS, dataset_spec

    decomposed = ", ".join(name for name in DATASETS.names() if dataset_spec(name).decomposes)
    return f"target (the target model, default) | dataset (gold decomposition: {decomposed}) | a model spec"


TEACHER_HELP = _teacher_help()


def register(app: typer.Typer, user_errors: Callable[[], ContextManager[None]]) -> None:
    @app.command("synth")
    def synth_command(
        dataset: str = dataset_flag(...),
        data: Path = data_flag(..., role="Training questions (a train split: never the questions you evaluate on)"),
        out: Path = typer.Option(..., "--out", help="Output directory (created, or resumed when it exists)."),
        corpus: str = corpus_flag("contexts"),
        model: str = model_flag("bundled", role="Target model"),
        teacher: Optional[str] = typer.Option(None, "--teacher", help=f"Who writes sub-questions and retrieved answers: {TEACHER_HELP}."),
        hop_reader: Optional[str] = typer.Option(None, "--hop-reader", help="A model spec that writes the answers of retrieved steps in the teacher's stead (a stronger reader beside --teacher dataset); default: the teacher."),
        limit: Optional[int] = limit_flag(role="Questions after --skip"),
        skip: int = typer.Option(0, "--skip", help="Leave out the first N questions of the file."),
        max_subqueries: Optional[int] = typer.Option(None, "--max-subqueries", help="T: most sub-questions in a narrative (default: the dataset's DeepRAG limit, 6 on HotpotQA, 10 elsewhere)."),
        max_steps: Optional[int] = old_spelling("--max-steps", metavar="N"),  # elsewhere: optimizer steps
        max_retrievals: Optional[int] = typer.Option(None, "--max-retrievals", help="R: most retrievals in a narrative (default: the dataset's DeepRAG limit, 6 on HotpotQA, 10 elsewhere)."),
        max_nodes: Optional[int] = typer.Option(None, "--max-nodes", help="Most tree nodes expanded per question (default: the whole tree for T and R; a smaller budget cuts questions, counted in the summary)."),
        k: int = typer.Option(3, "--k", help="Passages per retrieval."),
        match: str = typer.Option("em", "--match", help="When a final answer is correct: em (normalised exact match) | contains (a gold answer's words inside the answer's or the reverse, the authors' rule; the trajectory then saves the gold answer) | f1:T."),
        shots: Optional[int] = typer.Option(None, "--shots", help="Worked examples in the target's prompt (default: all; 0 for a trained checkpoint)."),
        narrative: Optional[str] = typer.Option(None, "--narrative", help="The target's prompt style: plain | chat (inside its chat template); default: as a trained checkpoint was trained, else plain."),
        select: str = typer.Option("min", "--select", help="Which correct narrative to keep: min (fewest retrievals, the paper's) | max (most) | random (seeded by --seed); max and random search the whole tree."),
        seed: int = typer.Option(0, "--seed", help="Seed of --select random (each question's draw depends on it and the question id)."),
        batch: int = batch_flag(1, role="Batch of the tree search", at_least=1),
        retriever: Optional[str] = retriever_flag(),
        retriever_option: list[str] = retriever_option_flag(),
        aliases: Optional[Path] = aliases_flag(),
        skip_bad: bool = skip_bad_flag(),
        progress: bool = progress_flag(),
    ) -> None:
        """Binary tree search for a correct retrieval narrative of each question, the cheapest by default (DeepRAG stage I data)."""
        with user_errors():
            import json

            from dynrag.deeprag.synth import SynthJobOptions
            from dynrag.run.jobs import JOBS
            from dynrag.registry import parse_pairs, split_csv_pairs

            req = SynthJobOptions(
                dataset=dataset, data=data, out=out, corpus=corpus, model=model, teacher=teacher, hop_reader=hop_reader, limit=limit,
                skip=skip, max_steps=renamed(max_subqueries, max_steps, "--max-subqueries", "--max-steps"), max_retrievals=max_retrievals, max_nodes=max_nodes, k=k, match=match, shots=shots, narrative=narrative,
                aliases=aliases, skip_bad=skip_bad, retriever=retriever,
                retriever_options=parse_pairs(split_csv_pairs(retriever_option), flag="--retriever-option"),
                select=select, seed=seed, batch=batch,
            )
            summary = JOBS.open("synth", req, console=Console(stderr=True), progress=progress)
            sys.stdout.write(json.dumps(summary, indent=2) + "\n")

    from dynrag.deeprag.train_cli import register_train

    train = typer.Typer(no_args_is_help=True, help="Training: DeepRAG imitation (stage I) and chain of calibration (stage II); reader fine-tuning (RAG best practices).")
    register_train(train, user_errors)
    app.add_typer(train, name="train")
