"""DeepRAG's imitation examples: the narrative of one trajectory as the method will later read and
write it (no worked examples in the prompt): instruction and question (given), then every
sub-question, decision marker, answer and the final answer (learned), with the retrieved passages
in between (given: label -100, so the model never learns to write passages), then the
end-of-sequence token (learned).
"""

from __future__ import annotations

from typing import Any

from dynrag.deeprag.trajectory import Trajectory
from dynrag.lm.base import Prompt
from dynrag.methods.deeprag.narrative import FINAL_SEG, Narrative, final_line
from dynrag.training.examples import TrainExample, masked_tokens


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
