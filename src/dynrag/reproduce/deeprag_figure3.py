"""`dynrag reproduce deeprag-figure3 --world DIR --model hf:ckpt/imi`: DeepRAG's Figure 3, the
training dynamics of stage II by GRPO: F1 on held-out questions and retrievals per question
against the optimizer step.

GRPO (`dynrag train grpo`, deeprag/grpo.py) starts from the stage-I model given as --model and
trains on the world's train split, retrieving from the world's corpus. Every `dev_every` steps,
and at steps 0 and last, the policy answers the first --limit questions of the world's dev split
greedily (deeprag/grpo_dev.py); those checks are the figure, not the rollouts' own scores. Both
rest on the world's DeepRAG limits (its dataset entry), as synthesis and evaluation do.

    OUT/deeprag-figure3/<model>/   the GRPO run: train_log.jsonl, rollouts.jsonl, dev_log.jsonl,
                                   grpo_dev.png (the figure), the final checkpoint

The paper's reading, "F1 rises while retrievals per question fall", is tested between the first
and the last check on the same questions (paired permutation tests). The paper plots curves
without their values, so there is no published column.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from pydantic import Field
from rich.console import Console

from dynrag.errors import ConfigError, DataError
from dynrag.registry import Options, parse_model
from dynrag.reproduce.runs import slug
from dynrag.reproduce.world import DATASET, world_index
from dynrag.reproduce.world_tests import Tested, paired_lower

NAME = "deeprag-figure3"
SOURCE = ("Guan et al., DeepRAG: Thinking to Retrieve Step by Step for Large Language Models, 2025: Section 5.3 "
          "and Figure 3 (GRPO from the stage-I model; F1 on 2WikiMultihopQA rises as the retrievals per question "
          "fall). The figure gives curves, not values, so there is no published column.")


class Figure3Options(Options):
    """The figure's own options; any other --option KEY=VALUE is a `train grpo` option (group,
    batch_size, beta, lr, ...) over the recipe's."""

    recipe: str = Field("authors", description="authors (the authors' script: 256 rollouts a step) | cpu-small")
    steps: int = Field(20, ge=1, description="optimizer steps")
    dev_every: int = Field(5, ge=1, description="check the dev questions every N steps (and at 0 and the last)")
    train: int | None = Field(None, ge=1, description="training questions (default: enough for the steps, one pass)")
    train_skip: int = Field(0, ge=0, description="leave out the first N train questions (those stage I was synthesised from)")


def split_options(values: Mapping[str, Any]) -> tuple[Figure3Options, dict[str, Any]]:
    own = {k: v for k, v in values.items() if k in Figure3Options.model_fields}
    return parse_model(Figure3Options, own, "--option"), {k: v for k, v in values.items() if k not in own}


def world_split(world: Path, split: str) -> Path:
    path = Path(world) / f"{split}.jsonl"
    if not path.is_file():
        raise DataError(str(path), f"the world has no {split} split (make it again with `dynrag world make --out DIR`)")
    return path


def figure3_command(*, world: Path | None, model: str, limit: int | None, out: Path, run: bool,
                    options: Mapping[str, Any], console: Console, progress: bool) -> str:
    """Run (or resume, or with run=False only read) the figure's GRPO run; the markdown report."""
    from dynrag.deeprag.grpo import GrpoJobOptions, run_grpo
    from dynrag.deeprag.grpo_dev import load_dev_check, read_dev_log
    from dynrag.deeprag.grpo_options import grpo_options

    if world is None:
        raise ConfigError(f"{NAME} runs on a generated world: give --world DIR (dynrag world make --out DIR)")
    own, rest = split_options(options)
    if own.dev_every > own.steps:
        raise ConfigError(f"--option dev_every={own.dev_every} is more than steps={own.steps}: the curve would have two points")
    training = grpo_options(own.recipe, {"max_steps": own.steps, "save_every": own.dev_every, **rest}, "--option")
    train_n = own.train or own.steps * training.batch_size
    where = Path(out) / NAME / slug(model)
    if run:
        dev = load_dev_check(DATASET, world_split(world, "dev"), limit or 50, own.dev_every, console)
        index = world_index(Path(world), Path(out), build=True)
        request = GrpoJobOptions(dataset=DATASET, data=world_split(world, "train"), out=where, model=model, corpus=str(index), options=training,
                              limit=train_n, skip=own.train_skip, dev=dev)
        run_grpo(request, console=console, progress=progress)
    return render(read_dev_log(where), where, model, own, training, train_n)


def render(checks: list[dict[str, Any]], where: Path, model: str, own: Figure3Options, training: Any, train_n: int) -> str:
    from dynrag.deeprag.grpo_dev import DEV_PLOT, dev_summary
    from dynrag.io.jsonl import read_jsonl
    from dynrag.training.trainer import TRAIN_LOG

    rewards = {r["step"]: r for r in read_jsonl(where / TRAIN_LOG, repair=True)}
    lines = [f"## DeepRAG Figure 3: GRPO training dynamics on a world ({model})", "",
             f"Recipe `{own.recipe}`: {training.batch_size} questions x {training.group} rollouts a step, β {training.beta}, "
             f"lr {training.lr or 'default'}, {own.steps} steps on {train_n} train questions (from question "
             f"{own.train_skip + 1}); dev checks every {own.dev_every} steps.", ""]
    if not checks:
        return "\n".join([*lines, "No dev check has run yet (run without --no-run).", "", f"Source: {SOURCE}", ""])
    lines += ["| step | dev EM | dev F1 | dev retrievals/question | dev sub-questions/question | rollout reward (that step) |",
              "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    for record in checks:
        s = dev_summary(record)
        reward = rewards.get(s["step"], {}).get("reward")
        lines.append(f"| {s['step']} | {s['em']:.3f} | {s['f1']:.3f} | {s['retrievals']:.2f} | {s['subquestions']:.2f} | "
                     f"{'–' if reward is None else f'{reward:.3f}'} |")
    lines += ["", f"n = {len(checks[0]['questions'])} dev questions per check. Plot: {where / DEV_PLOT}", ""]
    if len(checks) >= 2:
        lines += claim_lines(checks[0], checks[-1])
    return "\n".join([*lines, "", f"Source: {SOURCE}", ""])


def claims(first: dict[str, Any], last: dict[str, Any]) -> dict[str, Tested]:
    """The figure's two readings, first check against last on the same questions."""
    a, b = ({q["id"]: q for q in r["questions"]} for r in (first, last))
    ids = [i for i in a if i in b]
    return {
        "F1 rises": paired_lower([a[i]["f1"] for i in ids], [b[i]["f1"] for i in ids]),
        "retrievals per question fall": paired_lower([b[i]["retrievals"] for i in ids], [a[i]["retrievals"] for i in ids]),
    }


def claim_lines(first: dict[str, Any], last: dict[str, Any]) -> list[str]:
    lines = []
    for name, tested in claims(first, last).items():
        lines.append(f"- {name} from step {first['step']} to step {last['step']}: effect {tested.effect:+.3f}, "
                     f"{tested.test}, n {tested.n}, p = {tested.p:.3g}: **{tested.verdict}**.")
    return lines
