"""A scripted model that writes given turns word by word, with given entropies, honouring
``stop_after`` sentence ends and ``stop_when`` as a real backend does; and a retriever of named
passages. For tests that must know exactly what a method sees and searches."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from dynrag.lm.base import Capabilities, Generation, Prompt
from dynrag.methods.prompting import DOCUMENTS
from dynrag.retrieval.base import BatchSearch, Hit


class SentenceLM:
    """Each generate call writes the next turn: a text, or (text, entropy per word). One token per
    word (a turn that starts with a space continues the answer with one); with ``stop_after`` a word
    ending in . ? ! ends the call there."""

    capabilities = Capabilities(attention=False, logprobs=True)
    name = "sentences"

    def __init__(self, turns):
        self.turns = [t if isinstance(t, tuple) else (t, None) for t in turns]
        self.prompts: list[Prompt] = []
        self.decoded = 0

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def documents(self, call: int) -> str:
        """The documents segment of call number ``call``'s prompt ("" without documents)."""
        prompt = self.prompts[call]
        return "".join(prompt.text[s.start : s.end] for s in prompt.segments if s.name == DOCUMENTS)

    def generate(self, prompt, max_new_tokens, stop=(), capture_attention=False, stop_after=(), stop_when=None):
        prompt = Prompt.of(prompt)
        self.prompts.append(prompt)
        text, entropies = self.turns.pop(0) if self.turns else ("", None)
        words = text.split()
        entropies = list(entropies) if entropies is not None else [0.0] * len(words)
        state = SimpleNamespace(pieces=[], raw_tokens=[], entropies=[], token_ids=[], logprobs=[])
        reason = "eos"
        for i, word in enumerate(words):
            if len(state.pieces) == max_new_tokens:
                reason = "length"
                break
            piece = (" " if i or text.startswith(" ") else "") + word  # a leading space continues the text
            state.pieces.append(piece)
            state.raw_tokens.append(piece)
            state.entropies.append(float(entropies[i]))
            state.token_ids.append(i)
            state.logprobs.append(0.0)
            self.decoded += 1
            if stop_when is not None and stop_when(state):
                reason = "callback"
                break
            if stop_after and word.endswith((".", "?", "!")):  # a real model would go on: the stop ends it
                reason = "stop_after"
                break
        n = len(state.pieces)
        return Generation(
            prompt=prompt, prompt_token_ids=[], prompt_offsets=[], prompt_raw_tokens=[], token_ids=state.token_ids,
            pieces=state.pieces, raw_tokens=state.raw_tokens, logprobs=np.zeros(n, dtype=np.float32),
            entropies=np.asarray(state.entropies, dtype=np.float32), attention=None, stop_reason=reason,
            decoded_tokens=n,
        )


class NamedPassages(BatchSearch):
    """Per query, the passages named in ``rankings`` (title = id, text "about ID"); records the queries."""

    def __init__(self, rankings: dict[str, list[str]], default: list[str] | None = None):
        self.rankings, self.default = rankings, list(default or [])
        self.queries: list[str] = []

    def search_batch(self, queries, k):
        self.queries.extend(queries)
        return [[Hit(pid, pid, f"about {pid}", 1.0) for pid in self.rankings.get(q, self.default)[:k]] for q in queries]
