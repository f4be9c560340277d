"""What every method shares: the Method protocol, its options base class, and the answer trace."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from pydantic import Field

from dynrag.datasets.formats.registry import Dataset
from dynrag.registry import Options
from dynrag.retrieval.base import Hit


@dataclass(frozen=True)
class MethodTraits:
    """What a method needs, declared by its class (``traits``) and read from its registry entry."""

    needs_retrieval: bool = True  # False: it answers closed book and takes no retriever or index
    # It reads the last layer's attention while decoding, so it runs only on a local model whose
    # backend captures attention (not behind an HTTP server).
    needs_attention: bool = False
    # It reads a middle layer's hidden states after sampled continuations (seakr): only the
    # transformers backend gives them (lm.base.Capabilities.hidden_states).
    needs_hidden_states: bool = False
    # What `dynrag tune` searches when no --space is given (NAME=SPEC strings, tune/space.py).
    tune_space: tuple[str, ...] = ()

    def runs_on(self, capabilities: Any) -> bool:
        """Whether a backend with these ``lm.base.Capabilities`` gives what the method reads."""
        return ((not self.needs_attention or bool(getattr(capabilities, "attention", False)))
                and (not self.needs_hidden_states or bool(getattr(capabilities, "hidden_states", False))))


class MethodOptions(Options):
    """Base for each method's options; unknown keys are errors, values are validated."""

    max_new_tokens: int = Field(128, ge=1)
    k: int = Field(3, ge=1)  # passages per retrieval: 0 would retrieve and show nothing

    def for_dataset(self, dataset: Dataset) -> "MethodOptions":
        """These options for a run on ``dataset``: a method whose defaults depend on the dataset
        (deeprag's limits) fills those the user did not give; the rest keep theirs."""
        return self


class ReasoningOptions(MethodOptions):
    """How much reasoning the project's prompt asks a chat reader for before its answer."""

    reasoning: Literal["chain", "brief"] = Field(
        "chain", description="chat readers: chain = one short sentence for each fact needed, as many as the "
        "question needs; brief = at most two short sentences (the instruction before chain readers)")

    def styled(self, builder: Any) -> Any:
        """``builder`` (a PromptBuilder) asking for this reasoning."""
        return builder.with_reasoning(self.reasoning)


@dataclass
class Retrieval:
    query: str
    hits: list[Hit]
    # Generated tokens kept before this retrieval fired (0 for retrieval before generation).
    position: int = 0
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "position": self.position,
            "reason": self.reason,
            "hits": [h.to_dict() for h in self.hits],
        }


@dataclass
class Step:
    """One generation call: what was generated, what was kept, and the per-word signals behind it."""

    kind: str  # e.g. "generate", "finish", "tentative"
    text: str
    kept_text: str
    generated_tokens: int  # decoded, including tokens later thrown away
    kept_tokens: int | None = None  # None: all of them were kept
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kept_tokens is None:
            self.kept_tokens = self.generated_tokens

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Trace:
    question: str
    method: str
    model: str
    options: dict[str, Any] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    retrievals: list[Retrieval] = field(default_factory=list)
    seconds: float = 0.0
    # What prompts left out to fit the model's context window, once per passage (or for the
    # exemplars) however many prompts repeated the cut: see methods/budget.py.
    truncations: list[dict[str, Any]] = field(default_factory=list)
    # Why the answer was stopped short of its end (a decoding budget spent), or None.
    cut: str | None = None

    def note_prompt(self, prompt: Any) -> None:
        """Record what ``prompt`` (a lm.base.Prompt) cut, unless that part was recorded already."""
        seen = {(n.get("part"), n.get("id")) for n in self.truncations}
        for note in getattr(prompt, "truncated", None) or ():
            if (note.get("part"), note.get("id")) not in seen:
                self.truncations.append(dict(note))
                seen.add((note.get("part"), note.get("id")))

    @property
    def generated_tokens(self) -> int:
        return sum(s.generated_tokens for s in self.steps)

    @property
    def kept_tokens(self) -> int:
        return sum(s.kept_tokens or 0 for s in self.steps)


@dataclass
class Answer:
    text: str  # the full generated answer (reasoning and answer phrase)
    final_answer: str  # the extracted short answer
    trace: Trace

    def to_dict(self) -> dict[str, Any]:
        t = self.trace
        return {
            "question": t.question,
            "method": t.method,
            "model": t.model,
            "options": t.options,
            "answer": self.text,
            "final_answer": self.final_answer,
            "retrievals": [r.to_dict() for r in t.retrievals],
            "generated_tokens": t.generated_tokens,
            "kept_tokens": t.kept_tokens,
            # decoded per kept token: the cost of text generated and then thrown away
            "waste_ratio": round(t.generated_tokens / t.kept_tokens, 4) if t.kept_tokens else None,
            "seconds": round(t.seconds, 3),
            "steps": [s.to_dict() for s in t.steps],
            "truncations": [dict(n) for n in t.truncations],
            **({"cut": t.cut} if t.cut else {}),
        }


@runtime_checkable
class Method(Protocol):
    name: ClassVar[str]
    traits: ClassVar[MethodTraits]

    def answer(self, question: str) -> Answer: ...
