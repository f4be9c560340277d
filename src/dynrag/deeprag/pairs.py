"""Preference pairs for the chain of calibration, built four ways (``PAIR_MODES``).

optimal (the default): one pair per step of each optimal narrative. Both sides share the history
up to and including the step's sub-question; `chosen` is the decision the optimal narrative took
there (the retrieve marker, or the answer marker), `rejected` the other one. The pair is about
the atomic decision alone, so the completions are the markers.

response: the same steps and prompts, but each side is the whole response to the sub-question:
the retrieve marker, the passages and the answer written from them, or the answer written from
memory. The rejected side is the sibling answer the synth kept (keep=siblings). Passages and the
restated sub-question are given text: ``chosen_given``/``rejected_given`` name their character
spans, and they carry no log-probability (as the imitation loss masks them).

all-nodes: a pair at every node of the searched tree whose two decisions can be ranked, not only
at the nodes of the optimal narrative. A decision's cost at a node is the fewest retrievals of a
correct narrative through it (from the synth's keep=all-correct list, which covers the whole tree);
the cheaper decision is chosen, a decision with no correct narrative below it loses to one with,
and a node whose two decisions cost the same, or where neither leads to a correct answer, has no
pair. Completions are the markers, as in optimal.

sentence-order: whole narratives ranked by retrieval count. The prompt is the question alone; each
side is a complete correct narrative (every step and the final answer), and every two correct
narratives of a question whose retrieval counts differ make a pair, the one with fewer chosen.
Passages are given text, as in response.

    {"format": "dynrag-pair/1", "id": "QID:STEP", "question_id": ..., "step": 1, "prompt": "...",
     "chosen": "Search results:", "rejected": "Answer:", "chosen_decision": "retrieve", "split": "train",
     "mode": "optimal", "chosen_given": [], "rejected_given": []}

chosen_decision is "retrieve" or "parametric" (the decision at the step or node), or
"fewer_retrievals" for sentence-order pairs.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Literal

from dynrag.deeprag.trajectory import Trajectory
from dynrag.errors import ConfigError
from dynrag.lm.base import Prompt
from dynrag.methods.deeprag.narrative import (
    ANSWER,
    FINAL_SEG,
    LEARNED_SEGMENTS,
    RETRIEVE,
    Narrative,
    NarrativeStep,
    add_step,
    add_subquery,
    final_line,
)

PAIR_FORMAT = "dynrag-pair/1"
PAIR_MODES = ("optimal", "all-nodes", "sentence-order", "response")
# What each mode needs the search to keep beside the selected narrative (synth's `keep`).
SYNTH_KEEP = {"optimal": "path", "response": "siblings", "all-nodes": "all-correct", "sentence-order": "all-correct"}
Span = tuple[int, int]


def check_pair_mode(mode: str) -> str:
    if mode not in PAIR_MODES:
        raise ConfigError(f"--pairs {mode!r}: choose one of {', '.join(PAIR_MODES)}")
    return mode


@dataclass(frozen=True)
class PreferencePair:
    id: str
    question_id: str
    step: int
    prompt: str
    chosen: str
    rejected: str
    chosen_decision: Literal["retrieve", "parametric", "fewer_retrievals"]
    split: Literal["train", "heldout"] = "train"
    mode: str = "optimal"
    chosen_given: tuple[Span, ...] = ()  # character spans of `chosen` that are given, not written
    rejected_given: tuple[Span, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"format": PAIR_FORMAT, **asdict(self)}


def _decision(retrieve: bool) -> Literal["retrieve", "parametric"]:
    return "retrieve" if retrieve else "parametric"


def _markers(retrieve: bool) -> tuple[str, str]:
    return (RETRIEVE, ANSWER) if retrieve else (ANSWER, RETRIEVE)


def given_spans(prompt: Prompt, start: int = 0) -> tuple[Span, ...]:
    """The spans (from char `start` on, relative to it) of the segments a model never writes."""
    return tuple((max(g.start, start) - start, g.end - start) for g in prompt.segments
                 if g.name not in LEARNED_SEGMENTS and g.end > start)


def completion(before: Prompt, add) -> tuple[str, tuple[Span, ...]]:
    """The text `add` appends to the prompt `before`, and its given spans."""
    start = len(before.text)
    add(before)
    return before.text[start:], given_spans(before, start)


def heldout_question(question_id: str, fraction: float) -> bool:
    """A fixed share of questions, chosen by a hash of the id, kept out of training."""
    if fraction <= 0:
        return False
    bucket = int(hashlib.sha256(question_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return bucket < fraction


def pairs_from_trajectory(t: Trajectory, narrative: Narrative, heldout: float = 0.0,
                          mode: str = "optimal") -> list[PreferencePair]:
    split = "heldout" if heldout_question(t.id, heldout) else "train"
    return {"optimal": _optimal_pairs, "response": _response_pairs, "all-nodes": _node_pairs,
            "sentence-order": _sentence_pairs}[check_pair_mode(mode)](t, narrative, split)


def _optimal_pairs(t: Trajectory, narrative: Narrative, split: str) -> list[PreferencePair]:
    pairs = []
    for i, step in enumerate(t.steps):
        prompt = add_subquery(narrative.prompt(t.question, t.steps[:i]), step.subquery).text
        chosen, rejected = _markers(step.retrieve)
        pairs.append(PreferencePair(f"{t.id}:{i + 1}", t.id, i + 1, prompt, chosen, rejected,
                                    _decision(step.retrieve), split))
    return pairs


def _response_pairs(t: Trajectory, narrative: Narrative, split: str) -> list[PreferencePair]:
    if len(t.others) != len(t.steps):
        raise ValueError(f"trajectory {t.id}: response pairs need each step's other answer (synth keep=siblings)")
    pairs = []
    for i, (step, other) in enumerate(zip(t.steps, t.others)):
        def base() -> Prompt:
            return add_subquery(narrative.prompt(t.question, t.steps[:i]), step.subquery)

        (chosen, chosen_given), (rejected, rejected_given) = (
            completion(base(), lambda p, s=s: _response(p, s)) for s in (step, other))
        pairs.append(PreferencePair(f"{t.id}:{i + 1}", t.id, i + 1, base().text, chosen, rejected,
                                    _decision(step.retrieve), split, "response", chosen_given, rejected_given))
    return pairs


def _response(prompt: Prompt, step: NarrativeStep) -> None:
    """What follows the sub-question's line: the step as the narrative renders it, less that line."""
    rendered = add_step(Prompt(), step)
    for seg in rendered.segments[1:]:
        prompt.add(seg.name, rendered.text[seg.start : seg.end])


def node_costs(correct: Iterable[tuple[tuple[NarrativeStep, ...], str]]) -> dict[tuple, dict[bool, int]]:
    """For each node (the steps before it, and its sub-question), the fewest retrievals of a
    correct narrative through each decision there; a decision with no correct narrative is absent."""
    costs: dict[tuple, dict[bool, int]] = {}
    for steps, _ in correct:
        total = sum(s.retrieve for s in steps)
        for i, step in enumerate(steps):
            best = costs.setdefault((steps[:i], step.subquery), {})
            best[step.retrieve] = min(best.get(step.retrieve, total), total)
    return costs


def _node_pairs(t: Trajectory, narrative: Narrative, split: str) -> list[PreferencePair]:
    if not t.correct:
        raise ValueError(f"trajectory {t.id}: all-nodes pairs need every correct narrative (synth keep=all-correct)")
    pairs = []
    for (history, subquery), best in node_costs(t.correct).items():
        if len(best) == 2 and best[True] == best[False]:
            continue  # both decisions lead equally cheaply to a correct answer: no preference
        retrieve = min(best, key=best.__getitem__)
        prompt = add_subquery(narrative.prompt(t.question, history), subquery).text
        chosen, rejected = _markers(retrieve)
        n = len(pairs) + 1
        pairs.append(PreferencePair(f"{t.id}:n{n}", t.id, len(history) + 1, prompt, chosen, rejected,
                                    _decision(retrieve), split, "all-nodes"))
    return pairs


def _sentence_pairs(t: Trajectory, narrative: Narrative, split: str) -> list[PreferencePair]:
    if not t.correct:
        raise ValueError(f"trajectory {t.id}: sentence-order pairs need every correct narrative (synth keep=all-correct)")
    prompt = narrative.prompt(t.question).text
    sides = []
    for steps, final in t.correct:
        def add(p: Prompt, steps=steps, final=final) -> None:
            for step in steps:
                add_step(p, step)
            p.add(FINAL_SEG, final_line(final))
        sides.append((sum(s.retrieve for s in steps), completion(narrative.prompt(t.question), add)))
    pairs = []
    for a, (cost_a, (text_a, given_a)) in enumerate(sides):
        for cost_b, (text_b, given_b) in sides[a + 1 :]:
            if cost_a == cost_b:
                continue
            (chosen, cg), (rejected, rg) = ((text_a, given_a), (text_b, given_b)) if cost_a < cost_b else \
                ((text_b, given_b), (text_a, given_a))
            pairs.append(PreferencePair(f"{t.id}:s{len(pairs) + 1}", t.id, 0, prompt, chosen, rejected,
                                        "fewer_retrievals", split, "sentence-order", cg, rg))
    return pairs


def build_pairs(trajectories: Iterable[Trajectory], narrative: Narrative | None = None, heldout: float = 0.0,
                mode: str = "optimal") -> list[PreferencePair]:
    narrative = narrative or Narrative(shots=0)
    return [p for t in trajectories for p in pairs_from_trajectory(t, narrative, heldout, mode)]


def tokenize_pair(tokenizer: Any, pair: PreferencePair) -> tuple[list[int], list[int], list[int]]:
    """(prompt ids, chosen ids, rejected ids), each completion tokenised as it follows the prompt."""
    prompt, (chosen, _), (rejected, _) = _tokenize(tokenizer, pair)
    return prompt, chosen, rejected


def pair_masks(tokenizer: Any, pair: PreferencePair) -> tuple[list[bool], list[bool]] | None:
    """Which completion tokens (as tokenize_pair gives them) carry log-probability: those whose
    last character is not in a given span. None when nothing is given (every token counts)."""
    if not pair.chosen_given and not pair.rejected_given:
        return None
    _, (_, chosen), (_, rejected) = _tokenize(tokenizer, pair)
    return chosen, rejected


def _tokenize(tokenizer: Any, pair: PreferencePair):
    prompt = list(tokenizer(pair.prompt, add_special_tokens=True).input_ids)

    def side(text: str, given: tuple[Span, ...]) -> tuple[list[int], list[bool]]:
        spans = {"return_offsets_mapping": True} if given else {}  # offsets only where a span needs them
        full = tokenizer(pair.prompt + text, add_special_tokens=True, **spans)
        ids, shift = list(full.input_ids), len(pair.prompt)
        offsets = list(full.offset_mapping) if given else [(0, 0)] * len(ids)
        if ids[: len(prompt)] == prompt and len(ids) > len(prompt):
            ids, offsets = ids[len(prompt) :], offsets[len(prompt) :]
        else:
            alone = tokenizer(text, add_special_tokens=False, **spans)
            ids, shift = list(alone.input_ids), 0
            offsets = list(alone.offset_mapping) if given else [(0, 0)] * len(ids)
        keep = [not any(a <= end - 1 - shift < b for a, b in given) for _, end in offsets]
        return ids, keep

    return prompt, side(pair.chosen, pair.chosen_given), side(pair.rejected, pair.rejected_given)
