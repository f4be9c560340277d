"""`dynrag train reader`: fine-tune the generator on training questions with a chosen context
(g, r, gr, gg: training/reader_examples.py), the loss on the answer line only. LoRA by default.

    OUT/config.json, model.safetensors, tokenizer files   an HF directory (adapters merged):
                           --model hf:OUT for single, dragin, eval, ask, reproduce
    OUT/deeprag.json       marks it complete; data, context, options, losses
    OUT/train_log.jsonl    one line per optimizer step
    OUT/loss.png           the loss curve
    OUT/checkpoint/        while training: what a rerun resumes from (removed at the end)

The loop, checkpoints, resume after kill -9 and the learning-rate schedule are the DeepRAG
trainer's (training/trainer.py); the adapters are folded into the weights at the end, so the output
loads like any HF model, without an adapter library.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pydantic import Field
from rich.console import Console

from dynrag.training.finetune import FineTune
from dynrag.training.supervised import already_trained, finish, train_masked, training_model
from dynrag.training.reader_examples import build_reader_examples, check_context, check_order
from dynrag.training.trainer import TrainOptions, schedule_meta
from dynrag.errors import DataError
from dynrag.datasets.examples import QAExample
from dynrag.datasets.loaders import load_examples
from dynrag.lm.loader import resolve_model
from dynrag.methods.prompting import PromptBuilder
from dynrag.run.jobs import JOBS, JobTraits, ModelGroup, OutputGroup


class FineTuneReaderJobOptions(ModelGroup, OutputGroup):
    """The `train reader` job's options: the model to fine-tune, OUT, the training questions and the
    context each is trained with."""

    dataset: str = Field(description="benchmark format of data (a dataset registry name)")
    data: list[Path] = Field(description="training questions with gold passages, one file or more")
    context: str = Field("gr", description="g | r | gr | gg: the passages each question is trained with")
    exemplars: str = Field("default", description="the worked-example style of the prompt (as `--exemplars` of eval)")
    limit: int | None = Field(None, description="only the first N questions (over all files)")
    options: TrainOptions = Field(default_factory=lambda: TrainOptions(method=FineTune.LORA),
                                  description="the training recipe (LoRA unless told otherwise)")
    order: str = Field("gold_first", description="the passages' order in each prompt (training/reader_examples.py)")


def load_training_questions(dataset: str, paths: list[Path], limit: int | None) -> list[QAExample]:
    questions: list[QAExample] = []
    for path in paths:
        questions += list(load_examples(dataset, path))
    questions = questions[:limit] if limit else questions
    if not questions:
        raise DataError(", ".join(str(p) for p in paths), "no questions to train on")
    return questions


def run_reader(req: FineTuneReaderJobOptions, *, console: Console | None = None, progress: bool = True) -> dict[str, Any]:
    console = console or Console(stderr=True)
    check_context(req.context)
    check_order(req.order)
    builder = PromptBuilder.for_dataset(req.exemplars)  # an unknown style fails before the model loads
    options, out = req.options, Path(req.out)
    questions = load_training_questions(req.dataset, list(req.data), req.limit)
    if (finished := already_trained(out, console)) is not None:
        return finished
    with training_model(out, req.model, options, progress) as (model, tokenizer, source, options, device):
        built = build_reader_examples(tokenizer, builder, questions, req.context, options.max_tokens, options.seed,
                                      req.order)
        examples = built.examples
        if not examples:
            raise DataError(str(req.data[0]), f"no usable question: {built.no_gold} without gold passages, "
                                              f"{built.too_long} longer than --option max_tokens={options.max_tokens}")
        for count, why in ((built.no_gold, "without gold passages or answer"),
                           (built.too_long, f"longer than {options.max_tokens} tokens")):
            if count:
                console.print(f"[yellow]left out {count} questions {why}[/yellow]")
        records, lr, steps = train_masked(
            model, tokenizer, examples, options, device, model_spec=req.model, out=out,
            identity={"context": req.context, **({"order": req.order} if req.order != "gold_first" else {})},
            headline=f"reader ({req.context}, {req.order}): {len(examples)} questions",
            description=f"reader {req.context}", console=console, progress=progress,
        )
        files = list(req.data)
        meta = {
            "stage": "reader",
            "context": req.context,
            "dataset": req.dataset,
            "base_model": resolve_model(req.model),
            "base_source": source,
            "data": [str(f) for f in files],
            "data_sha256": [hashlib.sha256(Path(f).read_bytes()).hexdigest() for f in files],
            "examples": len(examples),
            "left_out_no_gold": built.no_gold,
            "left_out_long": built.too_long,
            "lr": lr,
            "lr_schedule": schedule_meta(options, lr, steps),
        }
        prompt = {"builder": "single", "exemplars": req.exemplars, "shots": len(builder.exemplars)}
        return finish(model, tokenizer, out, options, records, meta, prompt)


JOBS.add("train reader", run_reader, FineTuneReaderJobOptions,
         summary="generator fine-tuning on questions with gold, random or mixed passages",
         traits=JobTraits(lock="out", loop="own"))
