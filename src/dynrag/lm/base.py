"""The LanguageModel protocol and the records it returns.

A Generation keeps, for every generated token, what dynamic-retrieval methods decide on: its
log-probability, the entropy of the whole next-token distribution and, when asked, the last-layer
attention row it paid to every earlier position. Prompt positions map back to named prompt segments
(exemplars, documents, question, answer so far) through `Prompt` char spans and token offsets.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable, Literal, Protocol, Sequence, runtime_checkable

import numpy as np


@dataclass(frozen=True, slots=True)
class Segment:
    name: str
    start: int  # char offset in the prompt text, inclusive
    end: int  # exclusive


@dataclass
class Prompt:
    """Prompt text built from named parts, so positions can be traced back to their part."""

    text: str = ""
    segments: list[Segment] = field(default_factory=list)
    # Text before this char offset is shared by many prompts (instruction and exemplars); a model
    # may keep its key/value cache and skip recomputing it.
    reusable_prefix: int = 0
    # What the prompt builder cut to fit the model's context window (methods/budget.py), e.g.
    # {"part": "document", "id": ..., "chars": ..., "kept_chars": ..., "kept_tokens": ...}.
    truncated: list[dict[str, Any]] = field(default_factory=list)

    def add(self, name: str, text: str) -> "Prompt":
        start = len(self.text)
        self.text += text
        if text:
            self.segments.append(Segment(name, start, len(self.text)))
        return self

    def mark_reusable_prefix(self) -> "Prompt":
        self.reusable_prefix = len(self.text)
        return self

    @classmethod
    def of(cls, prompt: "str | Prompt") -> "Prompt":
        return prompt if isinstance(prompt, Prompt) else cls().add("prompt", prompt)


# A prompt as a backend tokenized it: token ids, the (start, end) char span of each in the prompt
# text, and the text each token spells.
PromptTokens = tuple[list[int], list[tuple[int, int]], list[str]]

# eos: end-of-sequence token; stop: a `stop` string (cut off); stop_after: a `stop_after` string
# (kept); callback: `stop_when` said so; length: the token limit.
StopReason = Literal["eos", "stop", "stop_after", "callback", "length"]


@dataclass
class Generation:
    prompt: Prompt
    prompt_token_ids: list[int]
    # (start, end) char span in prompt.text of each prompt token; special tokens get (0, 0).
    prompt_offsets: list[tuple[int, int]]
    prompt_raw_tokens: list[str]
    token_ids: list[int]
    pieces: list[str]  # decoded text each token added
    raw_tokens: list[str]  # tokenizer vocabulary strings (with ▁ / Ġ markers), for word merging
    logprobs: np.ndarray  # (n,) natural log-probability of each chosen token
    entropies: np.ndarray  # (n,) natural-log entropy of the full next-token distribution
    # attention[k]: last-layer attention (mean over heads) of generated token k over positions
    # 0..prompt_len+k (itself last); None when capture was not asked for.
    attention: list[np.ndarray] | None
    stop_reason: StopReason
    # Tokens decoded, including any trimmed off after a stop string; len(token_ids) are kept.
    decoded_tokens: int = 0

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    @property
    def prompt_length(self) -> int:
        return len(self.prompt_token_ids)

    def __len__(self) -> int:
        return len(self.token_ids)

    def segment_positions(self, *names: str) -> np.ndarray:
        """Prompt token positions belonging to the named segments.

        A token belongs to the segment holding its last character, so a token that carries the
        space before a word ("▁who") goes with the word, not with the text before it.
        """
        spans = [(s.start, s.end) for s in self.prompt.segments if s.name in names]
        positions = [
            i
            for i, (a, b) in enumerate(self.prompt_offsets)
            if b > a and any(start <= b - 1 < end for start, end in spans)
        ]
        return np.asarray(positions, dtype=np.int64)

    def generated_attention(self) -> np.ndarray:
        """(n, n) matrix A[t, s]: attention generated token t pays to generated token s (s <= t)."""
        if self.attention is None:
            raise ValueError("this generation was made without attention capture")
        n, p = len(self.token_ids), self.prompt_length
        out = np.zeros((n, n), dtype=np.float32)
        for t, row in enumerate(self.attention):
            out[t, : t + 1] = row[p : p + t + 1]
        return out


# How a local model reuses key/value caches across calls (lm/kv_reuse.py): the longest matching
# recent call, only the marked instruction-and-exemplars prefix, or not at all.
KVReuseMode = Literal["recent", "prefix", "off"]
KV_REUSE_MODES: tuple[str, ...] = ("recent", "prefix", "off")


@dataclass
class PrefillCounts:
    """What the calls of one model cost in prefill (and what drafts saved in decoding), summed since
    the model was made."""

    calls: int = 0  # forward passes over a prompt (generate, next_token_logprobs)
    prompt_tokens: int = 0  # tokens of those prompts
    reused_tokens: int = 0  # of them, taken from a cached sequence instead of computed
    hits: int = 0  # calls that reused more than the pinned prefix
    pinned_tokens: int = 0  # computed to pin a marked prefix (once per distinct prefix)
    draft_proposed: int = 0  # prompt-lookup draft tokens fed for verification (lm/lookup.py)
    draft_accepted: int = 0  # of them, the ones greedy decoding then chose: forward passes saved

    @property
    def prefilled_tokens(self) -> int:
        """Tokens the model computed keys and values for before decoding."""
        return self.prompt_tokens - self.reused_tokens + self.pinned_tokens

    def copy(self) -> "PrefillCounts":
        return PrefillCounts(*(getattr(self, f.name) for f in fields(self)))

    def minus(self, before: "PrefillCounts") -> "PrefillCounts":
        return PrefillCounts(*(getattr(self, f.name) - getattr(before, f.name) for f in fields(self)))


@dataclass(frozen=True)
class Capabilities:
    """What a backend can give beyond text. A flag that is False means the matching method of
    ``LanguageModel`` raises; callers check with ``require`` first, so the error says what needs
    it and what to use instead."""

    attention: bool  # generate(capture_attention=True) records last-layer attention rows (DRAGIN)
    logprobs: bool  # generate records per-token log-probabilities and entropies (FLARE, DRAGIN)
    attention_pass: bool = False  # attention_pass(): a fresh pass over tokens (DRAGIN's reference variant)
    next_token_logprobs: bool = False  # next_token_logprobs() and first_token_id() (rerank=lm)
    text_logprobs: bool = False  # text_logprobs(): log p of every token of a text (compress=selective)
    hidden_states: bool = False  # sample_hidden_states(): a middle layer's state after sampled continuations (SeaKR)


# The most each local backend can give, known before any model is loaded, so a command can place a
# row on a backend that serves it without loading one first. A loaded model may give less (llama.cpp
# reads attention only from architectures whose graph it recognises), never more.
BACKEND_CAPABILITIES: dict[str, Capabilities] = {
    "transformers": Capabilities(attention=True, logprobs=True, attention_pass=True, next_token_logprobs=True,
                                 text_logprobs=True, hidden_states=True),
    "llama.cpp": Capabilities(attention=True, logprobs=True, attention_pass=True, next_token_logprobs=True,
                              hidden_states=True),
}


# What each capability is, in the words of an error message.
CAPABILITY_TEXT = {
    "attention": "last-layer attention captured while decoding",
    "logprobs": "per-token log-probabilities and entropies",
    "attention_pass": "an extra attention pass over the generated tokens",
    "next_token_logprobs": "next-token probabilities of chosen words",
    "text_logprobs": "token log-probabilities of a given text",
    "hidden_states": "the hidden states of sampled continuations",
}


@dataclass
class HiddenSamples:
    """Continuations sampled from one prompt and, for each, one layer's hidden state read at an
    end-of-sequence token fed right after it (``states[i]`` belongs to ``texts[i]``)."""

    texts: list[str]
    states: np.ndarray  # (n, hidden size), float32 on the CPU
    # The tokens before the EOS whose state was read: the token that ended a row (a stop string's
    # or the limit's) was replaced by the EOS, so it is not among them.
    token_ids: list[list[int]] = field(default_factory=list)


def context_window(lm: Any) -> int | None:
    """``lm.context_window`` when the model states one (a positive int), else None; backends
    written before the attribute existed have none."""
    window = getattr(lm, "context_window", None)
    return window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None


def clip_to_bytes(text: str, limit: int) -> str:
    """The longest prefix of ``text`` of at most ``limit`` UTF-8 bytes (so at most ``limit``
    tokens of a byte-level or SentencePiece vocabulary: a token covers at least one byte)."""
    data = text.encode("utf-8")
    return text if len(data) <= limit else data[: max(limit, 0)].decode("utf-8", errors="ignore")


def require(lm: Any, capability: str, *, needed_by: str, instead: str) -> None:
    """Raise a ConfigError naming the model, the missing capability, who needs it and what to
    use instead, unless ``lm.capabilities`` has ``capability``."""
    from dynrag.errors import ConfigError

    if getattr(getattr(lm, "capabilities", None), capability, False):
        return
    raise ConfigError(
        f"{needed_by} needs {CAPABILITY_TEXT[capability]}, which model {getattr(lm, 'name', lm)!r} "
        f"cannot give; {instead}"
    )


@runtime_checkable
class LanguageModel(Protocol):
    name: str
    capabilities: Capabilities
    # Tokens the model attends to, prompt and generated text together; None when unknown (then
    # prompts are not bounded). A local model reads it from its config; an HTTP backend from its
    # server (vLLM's max_model_len, llama.cpp's n_ctx) or its options. Prompts are kept within it
    # with ``count_tokens``, which such a backend answers with the server's tokenizer.
    context_window: int | None

    def generate(
        self,
        prompt: str | Prompt,
        max_new_tokens: int,
        stop: Sequence[str] = (),
        capture_attention: bool = False,
        stop_after: Sequence[str] = (),
        stop_when: Callable[[Any], bool] | None = None,
    ) -> Generation: ...

    def count_tokens(self, text: str) -> int: ...

    # ---- optional: each works only where ``capabilities`` says so -------------------------------

    def first_token_id(self, text: str) -> int:
        """The id of the first token of ``text`` (no special tokens). [next_token_logprobs]"""
        ...

    def next_token_logprobs(self, prompt: str | Prompt, candidates: Sequence[str]) -> np.ndarray:
        """log P(next token = first token of each candidate) after ``prompt``. [next_token_logprobs]"""
        ...

    def text_logprobs(self, text: str) -> tuple[list[int], list[tuple[int, int]], np.ndarray]:
        """(token ids, char offsets, log p of each token given those before; NaN first). [text_logprobs]"""
        ...

    def attention_pass(self, token_ids: list[int], per_head: bool = False, bos: bool = True) -> np.ndarray:
        """Last-layer attention of one pass over ``token_ids`` alone: (T, T) or (heads, T, T); with
        ``bos`` a BOS token goes first (and is dropped from the result). [attention_pass]"""
        ...

    def encode(self, text: str, special_tokens: bool = False) -> list[int]:
        """Token ids of ``text`` (with ``special_tokens``: as a whole text, BOS and all). [attention_pass]"""
        ...

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of ``token_ids`` without special tokens. [attention_pass]"""
        ...

    def raw_tokens(self, token_ids: Sequence[int]) -> list[str]:
        """Vocabulary strings of ``token_ids`` (space markers kept), for word merging. [attention_pass]"""
        ...

    def sample_hidden_states(self, prompt: str | Prompt, n: int, layer: int | None, max_new_tokens: int, *,
                             stop: Sequence[str] = (), representation: str = "ffn", temperature: float = 1.0,
                             top_k: int = 0, top_p: float = 1.0, seed: int = 0) -> HiddenSamples:
        """``n`` continuations of ``prompt`` drawn together, each ended by an end-of-sequence token
        whose hidden state at decoder block ``layer`` (0-based; None: the middle block) is read:
        the block's feed-forward output (``ffn``) or the residual stream after it (``residual``).
        [hidden_states]"""
        ...


class WithoutOptionalCapabilities:
    """Base for a backend that has none of the optional capabilities (an HTTP model server): the
    methods exist, so the backend is a ``LanguageModel``, and each fails naming the model."""

    name: str
    capabilities = Capabilities(attention=False, logprobs=True)
    context_window: int | None = None  # set it from the server when it says

    def _lacks(self, capability: str) -> Any:
        require(self, capability, needed_by=f"{capability}()", instead="use a local model (bundled or hf:)")

    def first_token_id(self, text: str) -> int:
        return self._lacks("next_token_logprobs")

    def next_token_logprobs(self, prompt: str | Prompt, candidates: Sequence[str]) -> np.ndarray:
        return self._lacks("next_token_logprobs")

    def text_logprobs(self, text: str) -> tuple[list[int], list[tuple[int, int]], np.ndarray]:
        return self._lacks("text_logprobs")

    def attention_pass(self, token_ids: list[int], per_head: bool = False, bos: bool = True) -> np.ndarray:
        return self._lacks("attention_pass")

    def encode(self, text: str, special_tokens: bool = False) -> list[int]:
        return self._lacks("attention_pass")

    def decode(self, token_ids: Sequence[int]) -> str:
        return self._lacks("attention_pass")

    def raw_tokens(self, token_ids: Sequence[int]) -> list[str]:
        return self._lacks("attention_pass")

    def sample_hidden_states(self, prompt: str | Prompt, n: int, layer: int | None, max_new_tokens: int,
                             **sampling: Any) -> HiddenSamples:
        return self._lacks("hidden_states")
