"""One row of decoding: choose each token (greedy, or sampled with a seeded generator), apply
the stop rules, build the Generation.

The same ``RowDecoder`` runs whether a row decodes alone (``HFLanguageModel.generate``) or as one
row of a batch (lm/batch_engine.py): whoever runs the model hands it each next-token distribution
and feeds back the token it returns, so one row decodes the same way in both.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from dynrag.lm.base import Generation, Prompt
from dynrag.lm.stopping import DecodeState, StopWhen, stop_after_position, stop_position, trim_to

# Pieces are decoded with a few tokens of left context so multi-byte characters and
# SentencePiece's leading-space handling come out right.
DECODE_CONTEXT = 4


class RowDecoder:
    """What one generate call has decoded so far, and the rules that end it.

    ``attention_rows`` is the list where the caller puts the last-layer attention row of each
    generated token once it has been fed back (shared, not copied); a ``stop_when`` callback sees
    the rows of every token but the newest, as it would without batching or drafts.
    """

    def __init__(
        self,
        tokenizer: Any,
        eos_token_ids: set[int],
        prompt: Prompt,
        prompt_ids: list[int],
        offsets: list[tuple[int, int]],
        max_new_tokens: int,
        stop: Sequence[str] = (),
        stop_after: Sequence[str] = (),
        stop_when: StopWhen | None = None,
        attention_rows: list[np.ndarray] | None = None,
        sampler: "TokenSampler | None" = None,
    ):
        self.tokenizer, self.eos_token_ids = tokenizer, eos_token_ids
        self.prompt, self.prompt_ids, self.offsets = prompt, prompt_ids, offsets
        self.max_new_tokens, self.stop, self.stop_after, self.stop_when = max_new_tokens, stop, stop_after, stop_when
        self.attention_rows = attention_rows if attention_rows is not None else []
        self.sampler = sampler  # None: greedy
        self.visible_rows: list[np.ndarray] = []
        self.state = DecodeState(len(prompt_ids), [], [], [], [], self.visible_rows, [])
        self.text = ""
        self.stop_reason = "length"
        self.decoded = 0  # counts tokens later trimmed away too: the cost of a stop string
        self.done = max_new_tokens <= 0

    @property
    def token_ids(self) -> list[int]:
        return self.state.token_ids

    def take(self, logits: torch.Tensor) -> int | None:
        """Choose the next token from ``logits`` (the model's scores after the last token fed);
        returns the token to feed next, or None when the generation has ended."""
        if self.done:
            raise RuntimeError("this row has finished decoding")
        state = self.state
        ids, pieces = state.token_ids, state.pieces
        self.decoded += 1
        token = greedy_token(logits, state) if self.sampler is None else self.sampler.take(logits, state)
        if token in self.eos_token_ids:
            pieces.append("")
            return self._end("eos")
        piece = self._piece(self.prompt_ids[-DECODE_CONTEXT:] + ids[-DECODE_CONTEXT - 1 :])
        pieces.append(piece)
        if self.stop_when is not None:
            state.raw_tokens.append(self.tokenizer.convert_ids_to_tokens(token))
            self.visible_rows.extend(self.attention_rows[len(self.visible_rows) : len(ids) - 1])
        self.text += piece
        cut, reason = stop_cut(self.text, self.stop, self.stop_after, len(piece))
        if cut is not None:
            trim_to(cut, ids, pieces, state.logprobs, state.entropies)
            return self._end(reason)
        if self.stop_when is not None and self.stop_when(state):
            return self._end("callback")
        if len(ids) >= self.max_new_tokens:
            return self._end("length")
        return token

    def _end(self, reason: str) -> None:
        self.stop_reason, self.done = reason, True
        return None

    def needs_last_row(self) -> bool:
        """Whether the newest kept token still lacks its attention row (it was never fed back)."""
        return len(self.attention_rows) < len(self.state.token_ids)

    def _piece(self, window: list[int]) -> str:
        """Text the last token of `window` adds, decoded after the tokens before it."""
        before = self.tokenizer.decode(window[:-1], skip_special_tokens=False)
        through = self.tokenizer.decode(window, skip_special_tokens=False)
        return through[len(before) :] if through.startswith(before) else self.tokenizer.decode(window[-1:])

    def generation(self, attention: list[np.ndarray] | None) -> Generation:
        state = self.state
        return Generation(
            prompt=self.prompt,
            prompt_token_ids=self.prompt_ids,
            prompt_offsets=self.offsets,
            prompt_raw_tokens=self.tokenizer.convert_ids_to_tokens(self.prompt_ids),
            token_ids=state.token_ids,
            pieces=state.pieces,
            raw_tokens=self.tokenizer.convert_ids_to_tokens(state.token_ids),
            logprobs=np.asarray(state.logprobs, dtype=np.float32),
            entropies=np.asarray(state.entropies, dtype=np.float32),
            attention=attention,
            stop_reason=self.stop_reason,  # type: ignore[arg-type]
            decoded_tokens=self.decoded,
        )


def greedy_token(logits: torch.Tensor, state: DecodeState) -> int:
    """The most likely next token, recorded in ``state`` with its log-probability and the entropy
    of the whole distribution."""
    log_p = torch.log_softmax(logits.float(), dim=-1)
    token = int(torch.argmax(log_p))
    state.entropies.append(float(-(log_p.exp() * log_p).nan_to_num().sum()))
    state.logprobs.append(float(log_p[token]))
    state.token_ids.append(token)
    return token


@dataclass(frozen=True)
class Sampling:
    """Sampled decoding: softmax(logits / temperature), cut to the smallest set of most likely
    tokens whose probability reaches top_p (nucleus), drawn with a torch Generator seeded by
    `seed`. Temperature 0 is greedy decoding."""

    temperature: float = 1.0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be 0 or more (got {self.temperature})")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1] (got {self.top_p})")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def call_seed(self, call: int) -> int:
        """The seed of the `call`-th generation made under this setting (0-based): each call has
        its own generator, so a sequence of calls is reproducible call by call."""
        return int.from_bytes(hashlib.sha256(f"{self.seed}:{call}".encode()).digest()[:8], "little") >> 1


class TokenSampler:
    """Draws the tokens of one generation; the generator lives on the CPU, so a seed gives the
    same tokens on any device for the same distributions."""

    def __init__(self, sampling: Sampling, seed: int):
        self.sampling = sampling
        self.generator = torch.Generator(device="cpu").manual_seed(seed)

    def take(self, logits: torch.Tensor, state: DecodeState) -> int:
        """A drawn next token, recorded in ``state`` as greedy_token records its choice (the
        log-probability and entropy are the model's own, at temperature 1)."""
        log_p = torch.log_softmax(logits.float(), dim=-1)
        probs = nucleus(torch.softmax(logits.float() / self.sampling.temperature, dim=-1), self.sampling.top_p)
        token = int(torch.multinomial(probs.cpu(), 1, generator=self.generator))
        state.entropies.append(float(-(log_p.exp() * log_p).nan_to_num().sum()))
        state.logprobs.append(float(log_p[token]))
        state.token_ids.append(token)
        return token


def nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """`probs` kept on the smallest set of most likely tokens whose total reaches top_p, renormalised
    (the most likely token is always kept; top_p 1 keeps all)."""
    if top_p >= 1.0:
        return probs
    ordered, order = torch.sort(probs, descending=True)
    before = torch.cumsum(ordered, dim=-1) - ordered  # mass of the more likely tokens
    keep = torch.zeros_like(probs, dtype=torch.bool)
    keep[order] = before < top_p
    kept = probs * keep
    return kept / kept.sum()


def stop_cut(text: str, stop: Sequence[str], stop_after: Sequence[str], new_chars: int) -> tuple[int | None, str]:
    """Where to cut ``text`` for a stop string completed by its last ``new_chars`` characters, and
    the stop reason ("stop" before a stop string, "stop_after" after one); (None, "length") when
    none is complete."""
    cut = stop_position(text, stop, new_chars)
    if cut is not None:
        return cut, "stop"
    cut = stop_after_position(text, stop_after, new_chars)
    if cut is not None:
        return cut, "stop_after"
    return None, "length"
