"""`?backend=llama.cpp`: a GGUF model decoded in this process by llama-cpp-python.

On two CPU cores llama.cpp decodes the quantised weights several times faster than transformers
decodes their float32 copy (benchmarks/LOG.md), which is what makes a 1.5B reader usable for
an evaluation here. Decoding is greedy, token by token through ``Llama.eval``, so every step's full
next-token distribution is at hand: the log-probability of the chosen token and the entropy are
exact (not the top-k estimate an HTTP server allows). Stop strings, ``stop_after`` and
``stop_when`` are applied exactly as the transformers backend applies them (lm/stopping.py).

Attention is read from llama.cpp's own graph (lm/llama_graph_attention.py): the last layer's
softmax is observed while a token is decoded, so DRAGIN's rows come from the same quantised
weights that chose the tokens. A pass over given tokens (DRAGIN's reference variant) runs in a
scratch context of the same model, so the decoding context keeps its cache. So do SeaKR's sampled
continuations, whose middle-block states are read from the same graph (lm/llama_hidden.py). What
it cannot give: the log-probabilities of a whole given text. ``Capabilities`` say so, and methods that need them
refuse this backend with one line.

The key/value cache of the previous call is kept: a prompt that shares a token prefix with what
the context already holds (the instruction and exemplars, or the last call's prompt and answer)
evaluates only the rest.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import numpy as np

from dynrag.errors import ConfigError, DynragError
from dynrag.lm.base import (BACKEND_CAPABILITIES, Generation, HiddenSamples, PrefillCounts, Prompt, PromptTokens,
                            WithoutOptionalCapabilities)
from dynrag.lm.chat import PromptStyle, choose_style, frame_from, jinja_renderer
from dynrag.lm.llama_graph_attention import LlamaGraphReader, square
from dynrag.lm.spec import ModelSpec
from dynrag.lm.stopping import DecodeState, StopWhen, check_stops

# Prompts here stay under a few thousand tokens; the cache for 8k positions of a 1.5B model is
# about 230 MB, where the models' full 32k would take four times that.
MAX_CONTEXT = 8192
INSTALL_HINT = "run `make test` or `make .venv/.llama-cpp`, which build llama-cpp-python with portable flags"


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Natural-log probabilities of a logit vector (float64, stable for large logits)."""
    z = logits.astype(np.float64) - float(np.max(logits))
    return z - np.log(np.exp(z).sum())


def entropy_of(logprobs: np.ndarray) -> float:
    """Entropy (nats) of the distribution whose log-probabilities are given."""
    return float(-(np.exp(logprobs) * logprobs).sum())


def char_offsets(token_bytes: Sequence[bytes], text: str) -> list[tuple[int, int]]:
    """(start, end) char span in ``text`` of each token, from the bytes each token spells; a token
    that spells nothing (a special token not in the text) gets (0, 0)."""
    byte_to_char = np.zeros(len(text.encode("utf-8")) + 1, dtype=np.int64)
    position = 0
    for i, ch in enumerate(text):
        width = len(ch.encode("utf-8"))
        byte_to_char[position : position + width] = i
        position += width
    byte_to_char[position] = len(text)
    spans, at = [], 0
    for piece in token_bytes:
        if not piece:
            spans.append((0, 0))
            continue
        end = min(at + len(piece), position)
        spans.append((int(byte_to_char[at]), int(byte_to_char[end])))
        at = end
    return spans


class LlamaCppLM(WithoutOptionalCapabilities):
    """Greedy decoding of a GGUF file with exact per-token log-probabilities and entropies; with
    ``graph`` (its attention reader), attention too; ``refused`` says why there is none."""

    def __init__(self, llama, name: str, prompt: str = "auto", preferred_style: PromptStyle = "plain",
                 graph: LlamaGraphReader | None = None, refused: str = ""):
        self.llama = llama
        self.name = name
        self.graph = graph
        self._refused = refused or f"model {name!r}: no attention reader was given"
        with_attention = graph is not None
        self.capabilities = replace(BACKEND_CAPABILITIES["llama.cpp"], attention=with_attention,
                                    attention_pass=with_attention)
        self.context_window = int(llama.n_ctx())
        self.eos_token_ids = {int(llama.token_eos())}
        # Read once: asked of every prompt and every decoded token.
        self._vocab = getattr(llama._model, "vocab", None)
        self._bos = bool(llama._model.add_bos_token())
        template = (llama.metadata or {}).get("tokenizer.chat_template")
        self.chat_frame = frame_from(jinja_renderer(template)) if template else None
        self.prompt_style: PromptStyle = choose_style(prompt, preferred_style, self.chat_frame)
        self._counts = PrefillCounts()
        self._sampler = None  # LlamaHiddenSampler, made on the first sample_hidden_states()

    @property
    def prefill_counts(self) -> PrefillCounts:
        return self._counts.copy()

    def attention_graph(self) -> LlamaGraphReader:
        """The reader of attention rows, or one line saying why this model has none."""
        if self.graph is None:
            raise ConfigError(self._refused)
        return self.graph

    def attention_pass(self, token_ids: list[int], per_head: bool = False, bos: bool = True) -> np.ndarray:
        """As the transformers backend's: one pass over ``token_ids`` alone (a BOS first with
        ``bos`` when the vocabulary has one), here in a scratch context (the decoding cache stays)."""
        graph = self.attention_graph()
        bos_id = int(self.llama.token_bos()) if bos else -1
        ids = ([bos_id] if bos_id >= 0 else []) + list(token_ids)
        heads = graph.graph.n_head
        if not ids:
            return np.zeros((heads, 0, 0) if per_head else (0, 0), dtype=np.float32)
        return square(graph.pass_rows(ids, per_head), len(ids) - len(token_ids), per_head, heads)

    def encode(self, text: str, special_tokens: bool = False) -> list[int]:
        return self.tokenize(text, bos=special_tokens and self._bos)

    def decode(self, token_ids: Sequence[int]) -> str:
        return bytes(self.llama.detokenize(list(token_ids))).decode("utf-8", errors="ignore")

    def raw_tokens(self, token_ids: Sequence[int]) -> list[str]:
        """Each token's text (a leading space starts a word), which word merging understands."""
        return [self.token_bytes(t).decode("utf-8", errors="replace") for t in token_ids]

    # -- tokens ----------------------------------------------------------------------------

    def tokenize(self, text: str, bos: bool = False) -> list[int]:
        # special=True: a chat template's markers in the text are its special tokens, as in transformers.
        return list(self.llama.tokenize(text.encode("utf-8"), add_bos=bos, special=True))

    def count_tokens(self, text: str) -> int:
        return len(self.tokenize(text))

    def first_token_id(self, text: str) -> int:
        ids = self.tokenize(text)
        if not ids:
            raise ValueError(f"{text!r} encodes to no tokens")
        return ids[0]

    def token_bytes(self, token_id: int, special: bool = False) -> bytes:
        """The bytes a token spells; with ``special``, a chat marker spells its own text."""
        return bytes(self.llama.detokenize([token_id], special=special))

    # -- decoding --------------------------------------------------------------------------

    def _logits_after(self, ids: list[int]) -> np.ndarray:
        """Evaluate ``ids`` (reusing the longest prefix the context already holds) and return the
        next-token logits."""
        held = int(self.llama.n_tokens)
        cached = self.llama.input_ids[:held]
        same = 0
        limit = min(held, len(ids) - 1)  # the last token is always evaluated: its logits are needed
        while same < limit and cached[same] == ids[same]:
            same += 1
        self.llama.n_tokens = same
        self.llama.eval(ids[same:])
        self._counts.calls += 1
        self._counts.prompt_tokens += len(ids)
        self._counts.reused_tokens += same
        return self._last_logits()

    def _last_logits(self) -> np.ndarray:
        # Llama.eval keeps no logits unless every position's are kept (gigabytes at 8k positions):
        # read the last position's straight from the context, copied before the next eval.
        raw = self.llama._ctx.get_logits()
        return np.ctypeslib.as_array(raw, shape=(int(self.llama.n_vocab()),)).copy()

    def _check_fits(self, prompt_ids: list[int], max_new_tokens: int) -> None:
        if len(prompt_ids) + max_new_tokens > self.context_window:
            raise DynragError(
                f"model {self.name!r}: a prompt of {len(prompt_ids)} tokens and {max_new_tokens} new ones "
                f"exceed its context of {self.context_window}"
            )

    def _ends_turn(self, token: int) -> bool:
        """End of text, or an instruct model's end-of-turn marker (llama.cpp's end-of-generation set)."""
        if token in self.eos_token_ids:
            return True
        if self._vocab is None:
            return False
        import llama_cpp

        return bool(llama_cpp.llama_vocab_is_eog(self._vocab, token))

    def generate(
        self,
        prompt: str | Prompt,
        max_new_tokens: int,
        stop: Sequence[str] = (),
        capture_attention: bool = False,
        stop_after: Sequence[str] = (),
        stop_when: StopWhen | None = None,
    ) -> Generation:
        prompt = Prompt.of(prompt)
        return self.decode_from(prompt, self.prompt_tokens(prompt), max_new_tokens, stop, stop_after, stop_when,
                                capture_attention)

    def decode_from(
        self,
        prompt: Prompt,
        tokens: PromptTokens,
        max_new_tokens: int,
        stop: Sequence[str] = (),
        stop_after: Sequence[str] = (),
        stop_when: StopWhen | None = None,
        capture_attention: bool = False,
    ) -> Generation:
        """Greedy decoding after ``prompt``, whose ``prompt_tokens`` are ``tokens``; with
        ``capture_attention`` each token's row is read as it is fed back, so ``stop_when`` sees
        the rows of every token but the newest, as on the transformers backend."""
        prompt_ids, offsets, raw = tokens
        self._check_fits(prompt_ids, max_new_tokens)
        if capture_attention:
            # before the prompt is evaluated: giving the context its callback empties its cache
            self.attention_graph().attach()
        rows: list[np.ndarray] = []
        state = DecodeState(len(prompt_ids), [], [], [], [], rows, [])
        logits = self._logits_after(prompt_ids)
        spelled = b""
        text = ""
        reason, decoded = "length", 0
        while len(state.token_ids) < max_new_tokens:
            logprobs = log_softmax(logits)
            token = int(np.argmax(logprobs))
            if self._ends_turn(token):
                reason = "eos"
                break
            decoded += 1
            spelled += self.token_bytes(token)
            now = spelled.decode("utf-8", errors="ignore")
            piece, text = now[len(text):], now
            state.token_ids.append(token)
            state.pieces.append(piece)
            state.raw_tokens.append(piece)
            state.logprobs.append(float(logprobs[token]))
            state.entropies.append(entropy_of(logprobs))
            stopped = check_stops(state, text, piece, stop, stop_after, stop_when)
            if stopped is not None:
                reason = stopped
                break
            if len(state.token_ids) >= max_new_tokens:
                break
            if capture_attention:
                rows.extend(self.attention_graph().decode_rows([token]))
            else:
                self.llama.eval([token])
            logits = self._last_logits()
        if capture_attention and len(rows) < len(state.token_ids):
            # the newest token was never fed back: its row takes one more evaluation
            rows.extend(self.attention_graph().decode_rows(state.token_ids[len(rows):]))
        return Generation(
            prompt=prompt,
            prompt_token_ids=prompt_ids,
            prompt_offsets=offsets,
            prompt_raw_tokens=raw,
            token_ids=state.token_ids,
            pieces=state.pieces,
            raw_tokens=state.raw_tokens,
            logprobs=np.asarray(state.logprobs, dtype=np.float32),
            entropies=np.asarray(state.entropies, dtype=np.float32),
            attention=rows[: len(state.token_ids)] if capture_attention else None,
            stop_reason=reason,  # type: ignore[arg-type]
            decoded_tokens=decoded,
        )

    def prompt_tokens(self, prompt: Prompt) -> PromptTokens:
        """(ids, char span of each in the prompt text, text each spells) of ``prompt``."""
        ids = self.tokenize(prompt.text, bos=self._bos)
        # Chat markers are written out in the prompt text, so they spell their text here; the BOS
        # token the tokenizer added is not in the text and spells nothing.
        spelled = [b"" if self._bos and i == 0 else self.token_bytes(t, special=True) for i, t in enumerate(ids)]
        return ids, char_offsets(spelled, prompt.text), [b.decode("utf-8", errors="replace") for b in spelled]

    def next_token_logprobs(self, prompt: str | Prompt, candidates: Sequence[str]) -> np.ndarray:
        text = Prompt.of(prompt).text
        logprobs = log_softmax(self._logits_after(self.tokenize(text, bos=self._bos)))
        return np.asarray([logprobs[self.first_token_id(c)] for c in candidates], dtype=np.float64)

    def sample_hidden_states(self, prompt: str | Prompt, n: int, layer: int | None, max_new_tokens: int, *,
                             stop: Sequence[str] = (), representation: str = "ffn", temperature: float = 1.0,
                             top_k: int = 0, top_p: float = 1.0, seed: int = 0) -> HiddenSamples:
        """``n`` continuations sampled together in a scratch context, with a block's state read
        from llama.cpp's graph at the EOS fed after each (lm/llama_hidden.py)."""
        from dynrag.lm.llama_hidden import LlamaHiddenSampler

        if self._sampler is None:
            self._sampler = LlamaHiddenSampler(self.llama)
        prompt_ids = self.prompt_tokens(Prompt.of(prompt))[0]
        self._check_fits(prompt_ids, max_new_tokens)
        logits = self._logits_after(prompt_ids)  # the decoding context now holds the prompt alone
        return self._sampler.sample(prompt_ids, logits, n=n, layer=layer, max_new_tokens=max_new_tokens, stop=stop,
                                    representation=representation, temperature=temperature, top_k=top_k, top_p=top_p,
                                    seed=seed, ends=self._ends_turn, eos_feed=int(self.llama.token_eos()),
                                    decode=self.decode)


def load_llama_cpp(spec: ModelSpec, path: Path, preferred_style: PromptStyle = "plain") -> LlamaCppLM:
    """A LlamaCppLM over the GGUF file at ``path``, on as many threads as the process may use,
    with attention when its graph shows it (checked now, on two tokens)."""
    try:
        from llama_cpp import Llama
    except ImportError as exc:
        raise DynragError(f"model spec {str(spec)!r}: backend=llama.cpp needs llama-cpp-python; {INSTALL_HINT}") from exc
    if not path.is_file():
        raise DynragError(f"model spec {str(spec)!r}: no such GGUF file {path}")
    threads = int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1)
    # Flash attention never forms the softmax that attention is read from; on the CPU it is no
    # faster either (measured: 16.6 against 14.9 ms a token for smollm2 on one thread).
    llama = Llama(model_path=str(path), n_ctx=MAX_CONTEXT, n_threads=threads, n_threads_batch=threads,
                  flash_attn=False, verbose=False)
    name = str(spec.resolved())  # resolved() leaves every spec but `bundled` as it is
    reader = LlamaGraphReader(llama)
    try:
        reader.check()
    except DynragError as exc:  # decoding still works; attention is refused with this line
        return LlamaCppLM(llama, name, spec.options.prompt, preferred_style, None, f"model {name!r}: {exc}")
    return LlamaCppLM(llama, name, spec.options.prompt, preferred_style, reader)
