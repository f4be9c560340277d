"""DeepRAG's imitation examples: the narrative of one trajectory as the method will later read and
write it (no worked examples in the prompt): instruction and question (given), then every
sub-question, decision marker, answer and the final answer (learned), with the retrieved passages
in between (given: label -100, so the model never learns to write passages), then the
end-of-sequence token (learned).
"""

from __future__ import annotations

from typing import Any, Sequence

from dynrag.deeprag.trajectory import Trajectory
from dynrag.errors import ConfigError, DataError
from dynrag.lm.base import Prompt
from dynrag.lm.chat import tokenizer_frame
from dynrag.methods.deeprag.narrative import FINAL_SEG, Narrative, NarrativeStyle, final_line
from dynrag.training.examples import TrainExample, masked_tokens


def narrative_style(trajectories: Sequence[Trajectory], source: str) -> NarrativeStyle:
    """The one prompt style the trajectories were searched in (a model learns one framing)."""
    styles = sorted({t.narrative for t in trajectories}) or ["plain"]
    if len(styles) > 1:
        raise DataError(source, f"mixes {' and '.join(styles)} narratives; train on one prompt style at a time")
    return styles[0]  # type: ignore[return-value]


def training_narrative(tokenizer: Any, style: NarrativeStyle) -> Narrative:
    """The narrative a model is trained on: no worked examples, in the trajectories' style (chat:
    inside the trained model's own template, as inference will frame it)."""
    if style == "plain":
        return Narrative(shots=0)
    frame = tokenizer_frame(tokenizer)
    if frame is None:
        raise ConfigError("the trajectories were searched inside a chat template, and the model to train has none; "
                          "train a model with one, or search again with --narrative plain")
    return Narrative(shots=0, frame=frame)


def narrative_text(trajectory: Trajectory, narrative: Narrative) -> Prompt:
    prompt = narrative.prompt(trajectory.question, trajectory.steps)
    return prompt.add(FINAL_SEG, final_line(trajectory.final_answer))


def imitation_example(tokenizer: Any, trajectory: Trajectory, narrative: Narrative | None = None) -> TrainExample:
    narrative = narrative or Narrative(shots=0)
    ids, labels = masked_tokens(tokenizer, narrative_text(trajectory, narrative))
    eos = tokenizer.eos_token_id
    if eos is not None:
        ids.append(eos)
        labels.append(eos)
    return TrainExample(trajectory.id, tuple(ids), tuple(labels))
