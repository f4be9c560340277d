"""What a query transform asks the model for: one short prompt per kind of text (a HyDE passage,
a rewritten query, sub-questions), laid out as plain few-shot text or inside a chat model's template.

The layout follows the one every other prompt of the package uses (lm/chat.py,
methods/prompting.py): a model prompted in the ``chat`` style gets the instruction as the system
message, the worked examples and the question as the user message, and the text's label (for
example ``Passage:``) opening its reply; any other model reads the same parts as plain text. The
caller passes the frame (``methods.prompting.chat_frame(lm)``), or None for plain text.

This module imports nothing heavy: the transforms' registry (transform_registry.py), which the run
configuration reads, stands on it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dynrag.lm.base import LanguageModel
    from dynrag.lm.chat import ChatFrame
    from dynrag.lm.row_decode import Sampling

PLACEHOLDER = "{question}"


@dataclass(frozen=True)
class QueryPrompt:
    """One kind of text the model writes for a question.

    ``kind`` names it in the cache file; ``examples`` are worked examples, each ending in a blank
    line; ``label`` opens the model's text; ``stop`` ends it; ``one_line`` collapses its
    whitespace (a HyDE passage, a query) where a list of sub-questions keeps its lines."""

    kind: str
    instruction: str
    examples: str
    label: str
    stop: tuple[str, ...]
    one_line: bool = True

    def template(self, frame: ChatFrame | None = None) -> str:
        """The prompt with ``{question}`` where the question goes. In a chat message the worked
        examples are marked as such: without the marks a small instruct model (Qwen2.5 0.5B)
        answered the example's question along with the real one."""
        if frame is None:
            return f"{self.instruction}\n\n{self.examples}Question: {PLACEHOLDER}\n{self.label}"
        user = f"Example:\n\n{self.examples}Now the question to work on:\n\nQuestion: {PLACEHOLDER}"
        return frame.wrap(self.instruction, user, self.label)

    def sha256(self, frame: ChatFrame | None = None) -> str:
        """The template's hash: a cached text is reused only under the very prompt that wrote it."""
        return hashlib.sha256(self.template(frame).encode("utf-8")).hexdigest()

    def text(self, question: str, frame: ChatFrame | None = None) -> str:
        """The prompt for ``question`` (its whitespace collapsed)."""
        return self.template(frame).replace(PLACEHOLDER, " ".join(question.split()))

    def write(self, lm: LanguageModel, question: str, max_new_tokens: int, frame: ChatFrame | None = None,
              sampling: Sampling | None = None) -> tuple[str, int]:
        """(the text the model writes for ``question``, tokens decoded to write it): greedy, or
        drawn with ``sampling`` (a model with ``sampled``, as lm/hf.py has)."""
        prompt = self.text(question, frame)
        if sampling is None:
            gen = lm.generate(prompt, max_new_tokens, stop=self.stop)
        else:
            with lm.sampled(sampling):  # type: ignore[attr-defined]
                gen = lm.generate(prompt, max_new_tokens, stop=self.stop)
        text = " ".join(gen.text.split()) if self.one_line else gen.text.strip()
        return text, gen.decoded_tokens or len(gen)


def can_sample(lm: Any) -> bool:
    """Whether ``lm`` draws tokens inside ``with lm.sampled(Sampling(...))`` (local models)."""
    return callable(getattr(lm, "sampled", None))
