"""A transformers causal LM that records what dynamic RAG needs per token. Decoding is greedy;
inside ``with lm.sampled(Sampling(...))`` (or with ``sampling=`` on one call) tokens are drawn
instead, each call with its own seeded generator (training rollouts, deeprag/rollout.py)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence

import numpy as np
import torch
from transformers import DynamicCache, PreTrainedModel, PreTrainedTokenizerBase

from dynrag.lm.base import BACKEND_CAPABILITIES, Generation, HiddenSamples, KVReuseMode, PrefillCounts, Prompt
from dynrag.lm.capture import install_recorder
from dynrag.lm.chat import PromptStyle, choose_style, tokenizer_frame
from dynrag.lm.kv_reuse import KVReuse, croppable, drop_last
from dynrag.lm.lookup import DEFAULT_DRAFT_TOKENS, lookup_draft
from dynrag.lm.row_decode import RowDecoder, Sampling, TokenSampler
from dynrag.lm.stopping import StopWhen


class HFLanguageModel:
    """Wraps a transformers model and tokenizer; greedy decoding with a KV cache."""

    capabilities = BACKEND_CAPABILITIES["transformers"]

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        name: str,
        kv_reuse: KVReuseMode = "recent",
        kv_slots: int = 4,
        draft_tokens: int = DEFAULT_DRAFT_TOKENS,
        prompt: str = "auto",
        preferred_style: PromptStyle = "plain",
    ):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        # How prompt builders lay out this model's prompts (lm/chat.py): plain text or its chat template.
        self.chat_frame = tokenizer_frame(tokenizer)
        self.prompt_style: PromptStyle = choose_style(prompt, preferred_style, self.chat_frame)
        self.context_window = model_context_window(model, tokenizer)
        self._recorder = install_recorder(self.model)
        self._kv = KVReuse(self.model.config, kv_reuse, kv_slots)
        # Prompt-lookup drafts verified per forward pass (lm/lookup.py); 0: one token per pass.
        self.draft_tokens = draft_tokens
        eos = getattr(model.generation_config, "eos_token_id", None)
        if eos is None:
            eos = tokenizer.eos_token_id
        self.eos_token_ids: set[int] = set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}
        # Set inside `sampled`: the setting and how many calls it has made (each call's seed).
        self.sampling: Sampling | None = None
        self._sampling_calls = 0

    @contextmanager
    def sampled(self, sampling: Sampling) -> Iterator[None]:
        """Every generate call inside draws its tokens; the n-th call's generator is seeded with
        ``sampling.call_seed(n)``, so the same calls in the same order give the same text."""
        if self.sampling is not None:
            raise RuntimeError("already sampling: sampled() does not nest")
        self.sampling, self._sampling_calls = sampling, 0
        try:
            yield
        finally:
            self.sampling = None

    def forget_caches(self) -> None:
        """Drop every kept key/value cache (the pinned prefix too): after the weights change
        (a training step), they no longer match the model."""
        mode = self._kv.mode
        self._kv.set_mode("off")
        self._kv.set_mode(mode)

    def _sampler(self, sampling: Sampling | None) -> TokenSampler | None:
        """The call's token sampler: from ``sampling`` (seed as given), else from the active
        ``sampled`` setting (the next call seed); None decodes greedily."""
        if sampling is None and self.sampling is not None:
            sampling = Sampling(self.sampling.temperature, self.sampling.top_p, self.sampling.call_seed(self._sampling_calls))
            self._sampling_calls += 1
        if sampling is None or sampling.greedy:
            return None
        return TokenSampler(sampling, sampling.seed)

    @property
    def kv_reuse(self) -> KVReuseMode:
        """How key/value caches are reused across calls: recent | prefix | off (lm/kv_reuse.py)."""
        return self._kv.mode

    @kv_reuse.setter
    def kv_reuse(self, mode: KVReuseMode) -> None:
        self._kv.set_mode(mode)

    @property
    def prefill_counts(self) -> PrefillCounts:
        """Prompt tokens seen and reused since the model was made (a copy)."""
        return self._kv.counts.copy()

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False).input_ids)

    def encode_prompt(self, prompt: Prompt) -> tuple[list[int], list[tuple[int, int]]]:
        # A prompt that starts with the BOS token (written out by a caller) gets no second one.
        bos = self.tokenizer.bos_token
        add_special = not (bos and prompt.text.startswith(bos))
        enc = self.tokenizer(
            prompt.text, add_special_tokens=add_special, return_offsets_mapping=True
        )
        return list(enc.input_ids), [tuple(o) for o in enc.offset_mapping]

    def _prefix_cache(
        self, prompt: Prompt, prompt_ids: list[int], offsets: list[tuple[int, int]]
    ) -> tuple[DynamicCache, int]:
        """A cache already holding the longest known prefix of the prompt, and how many tokens it covers.

        The marked prefix (instruction and exemplars) is the same for every call of a method, and
        often most of the prompt: it is computed once and kept. Beyond it, the caches of recent
        calls are reused when the prompt shares a prefix with one of them (lm/kv_reuse.py). Reused
        caches are copies, because decoding appends to them.
        """
        n = 0
        while n < len(prompt_ids) - 1 and offsets[n][1] <= prompt.reusable_prefix:
            n += 1
        key = tuple(prompt_ids[:n])
        self._kv.pin(key, lambda cache: self.model(
            input_ids=torch.tensor([list(key)], device=self.model.device), cache=cache, use_cache=True,
            logits_to_keep=1))
        return self._kv.lookup(prompt_ids)

    def _drop_drafts(self, cache: DynamicCache, fed: list[int], ahead: list, prompt_length: int) -> None:
        """Take the drafts still unconfirmed out of the cache, `fed` and the recorded rows (one
        row per generated token fed, when attention is captured)."""
        if not ahead:
            return
        drop_last(cache, len(ahead))
        del fed[-len(ahead):]
        del self._recorder.rows[len(fed) - prompt_length:]
        ahead.clear()

    @torch.inference_mode()
    def generate(
        self,
        prompt: str | Prompt,
        max_new_tokens: int,
        stop: Sequence[str] = (),
        capture_attention: bool = False,
        stop_after: Sequence[str] = (),
        stop_when: StopWhen | None = None,
        sampling: Sampling | None = None,
    ) -> Generation:
        prompt = Prompt.of(prompt)
        sampler = self._sampler(sampling)
        prompt_ids, offsets = self.encode_prompt(prompt)
        recorder = self._recorder
        # Prefill rows are not needed: each generated token's row is recorded when it is fed back.
        recorder.reset(active=False)
        cache, logits = self.prefill(prompt, prompt_ids, offsets)
        drafting = self.draft_tokens > 0 and croppable(cache)
        # With drafts a forward pass feeds several tokens, so every query row of it is recorded.
        recorder.reset(active=capture_attention, all_rows=drafting)
        row = RowDecoder(self.tokenizer, self.eos_token_ids, prompt, prompt_ids, offsets, max_new_tokens,
                         stop, stop_after, stop_when, attention_rows=recorder.rows, sampler=sampler)
        fed = list(prompt_ids)  # the tokens the cache holds (unconfirmed drafts too)
        ahead: list[tuple[int, torch.Tensor]] = []  # fed drafts, each with the logits that follow it
        while not row.done:
            token = row.take(logits)
            if token is None:
                break
            if ahead and ahead[0][0] == token:
                logits = ahead.pop(0)[1]  # the draft was right: its keys are cached already
                self._kv.counts.draft_accepted += 1
                continue
            room = min(self.draft_tokens, max_new_tokens - len(row.token_ids) - 1) if drafting else 0
            logits, ahead = self._feed(cache, fed, ahead, token, len(prompt_ids), room)
        self._drop_drafts(cache, fed, ahead, len(prompt_ids))
        attention = self._attention_rows(row.token_ids, cache, fed) if capture_attention else None
        recorder.reset(active=False)
        self._kv.store(fed, cache)
        return row.generation(attention)

    def prefill(
        self, prompt: Prompt, prompt_ids: list[int], offsets: list[tuple[int, int]]
    ) -> tuple[DynamicCache, torch.Tensor]:
        """The cache holding the prompt (a cached prefix reused, the rest fed now) and the logits
        of the first token to generate."""
        cache, done = self._prefix_cache(prompt, prompt_ids, offsets)
        # logits_to_keep=1: only the last position's logits are needed, and the LM head over a
        # large vocabulary (262k for Gemma 3) would otherwise dominate the prefill.
        logits = self.model(
            input_ids=torch.tensor([prompt_ids[done:]], device=self.model.device), cache=cache, use_cache=True,
            logits_to_keep=1,
        ).logits[0, -1]
        return cache, logits

    def _feed(
        self, cache: DynamicCache, fed: list[int], ahead: list, token: int, prompt_length: int, room: int
    ) -> tuple[torch.Tensor, list[tuple[int, torch.Tensor]]]:
        """Feed ``token`` to the model, with a prompt-lookup draft of at most ``room`` tokens after
        it; returns the logits that follow ``token`` and the drafts fed, each with the logits that
        follow it."""
        self._drop_drafts(cache, fed, ahead, prompt_length)
        draft = lookup_draft([*fed, token], room) if room > 0 else []
        feed = [token, *draft]
        out = self.model(
            input_ids=torch.tensor([feed], device=self.model.device), cache=cache, use_cache=True,
            logits_to_keep=len(feed),
        ).logits[0]
        fed.extend(feed)
        self._kv.counts.draft_proposed += len(draft)
        return out[0], list(zip(draft, out[1:]))

    @torch.inference_mode()
    def sample_hidden_states(self, prompt: str | Prompt, n: int, layer: int | None, max_new_tokens: int, *,
                             stop: Sequence[str] = (), representation: str = "ffn", temperature: float = 1.0,
                             top_k: int = 0, top_p: float = 1.0, seed: int = 0) -> HiddenSamples:
        """``n`` sampled continuations and a block's hidden state after each (lm/hidden.py); the
        prompt's prefix cache is reused as ``generate`` reuses it."""
        from dynrag.lm.hidden import resolve_block, sample_states

        block = resolve_block(self.model, layer)
        prompt = Prompt.of(prompt)
        prompt_ids, offsets = self.encode_prompt(prompt)
        self._recorder.reset(active=False)
        cache, logits = self.prefill(prompt, prompt_ids, offsets)
        return sample_states(self.model, self.tokenizer, cache, logits, self.eos_token_ids, n=n, layer=block,
                             max_new_tokens=max_new_tokens, stop=stop, representation=representation,
                             temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)

    @torch.inference_mode()
    def rows_of(self, cache: DynamicCache, token_ids: list[int]) -> list[np.ndarray]:
        """Feed ``token_ids`` after what ``cache`` holds, in one forward pass, and return each one's
        last-layer attention row over every position up to itself (lm/llama_attention.py, the
        reference the llama.cpp graph path is measured against, reads attention this way)."""
        if not token_ids:
            return []
        self._recorder.reset(active=True, all_rows=True)
        try:
            self.model(input_ids=torch.tensor([token_ids], device=self.model.device), cache=cache, use_cache=True,
                       logits_to_keep=1)
            return list(self._recorder.rows)
        finally:
            self._recorder.reset(active=False)

    def keep_cache(self, ids: list[int], cache: DynamicCache) -> None:
        """Offer ``cache`` (holding ``ids``) for reuse by later calls (lm/kv_reuse.py)."""
        self._kv.store(ids, cache)

    def _attention_rows(self, ids: list[int], cache: DynamicCache, fed: list[int]) -> list:
        """The recorded last-layer attention row of every generated token."""
        rows = self._recorder.rows[: len(ids)]
        if len(rows) < len(ids):
            # The newest token was never fed back; one more decode step yields its row.
            self.model(input_ids=torch.tensor([[ids[-1]]], device=self.model.device), cache=cache, use_cache=True)
            fed.append(ids[-1])
            rows = self._recorder.rows[: len(ids)]
        return rows

    @torch.inference_mode()
    def attention_pass(self, token_ids: list[int], per_head: bool = False, bos: bool = True) -> np.ndarray:
        """One forward pass over `token_ids` alone: last-layer attention, (T, T) or (heads, T, T).

        With `bos` a BOS token is put in front when the tokenizer has one, as a fresh pass over a text
        would have, and dropped from the result. Without it the pass sees exactly `token_ids`, as the
        DRAGIN authors' code runs it over the generated tokens: the first token then attends only
        to itself and absorbs much of the attention that a BOS would have taken. Only the
        `reference` DRAGIN variant needs this extra pass; decoding never does.
        """
        bos_id = self.tokenizer.bos_token_id if bos else None
        ids = ([bos_id] if bos_id is not None else []) + list(token_ids)
        if not ids:
            heads = getattr(self.model.config, "num_attention_heads", 1)
            shape = (heads, 0, 0) if per_head else (0, 0)
            return np.zeros(shape, dtype=np.float32)
        self._recorder.reset(active=True, all_rows=True, per_head=per_head)
        try:
            self.model(input_ids=torch.tensor([ids], device=self.model.device), use_cache=False)
            rows = self._recorder.rows
        finally:
            self._recorder.reset(active=False)
        skip = len(ids) - len(token_ids)
        t = len(ids)
        if per_head:
            heads = rows[0].shape[0]
            matrix = np.zeros((heads, t, t), dtype=np.float32)
            for i, row in enumerate(rows):
                matrix[:, i, : row.shape[-1]] = row
            return matrix[:, skip:, skip:]
        matrix = np.zeros((t, t), dtype=np.float32)
        for i, row in enumerate(rows):
            matrix[i, : len(row)] = row
        return matrix[skip:, skip:]

    @property
    def bos_token_id(self) -> int | None:
        return self.tokenizer.bos_token_id

    def encode(self, text: str, special_tokens: bool = False) -> list[int]:
        """Token ids of `text`; with `special_tokens`, as the tokenizer encodes a whole text (BOS...)."""
        return list(self.tokenizer(text, add_special_tokens=special_tokens).input_ids)

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True)

    def raw_tokens(self, token_ids: Sequence[int]) -> list[str]:
        """Vocabulary strings of `token_ids` (with the tokenizer's space markers), for word merging."""
        return self.tokenizer.convert_ids_to_tokens(list(token_ids))

    def first_token_id(self, text: str) -> int:
        """The id of the first token of `text` (no special tokens): how a one-word answer starts."""
        ids = self.tokenizer(text, add_special_tokens=False).input_ids
        if not ids:
            raise ValueError(f"{text!r} encodes to no tokens")
        return int(ids[0])

    @torch.inference_mode()
    def next_token_logprobs(self, prompt: str | Prompt, candidates: Sequence[str]) -> np.ndarray:
        """Natural-log probability that the token after `prompt` is the first token of each
        candidate string, from one forward pass (the LM-pointwise reranker, DeepRAG's margin)."""
        prompt = Prompt.of(prompt)
        ids, offsets = self.encode_prompt(prompt)
        wanted = [self.first_token_id(c) for c in candidates]
        cache, done = self._prefix_cache(prompt, ids, offsets)  # only the new tail is computed
        logits = self.model(
            input_ids=torch.tensor([ids[done:]], device=self.model.device), cache=cache, use_cache=True,
            logits_to_keep=1,
        ).logits[0, -1]
        self._kv.store(ids, cache)
        return torch.log_softmax(logits.float(), dim=-1)[wanted].cpu().numpy()

    @torch.inference_mode()
    def text_logprobs(self, text: str, chunk: int = 128) -> tuple[list[int], list[tuple[int, int]], np.ndarray]:
        """(token ids, char offsets, log p of each token given the ones before it) for `text`, from
        one forward pass; the first token (BOS when the tokenizer adds one) has no context: NaN.

        The LM head runs over `chunk` positions at a time, so a 262k-word vocabulary never needs
        a (length x vocabulary) matrix at once.
        """
        enc = self.tokenizer(text, add_special_tokens=True, return_offsets_mapping=True)
        ids = list(enc.input_ids)
        offsets = [tuple(o) for o in enc.offset_mapping]
        out = np.full(len(ids), np.nan, dtype=np.float32)
        if len(ids) < 2:
            return ids, offsets, out
        tensor = torch.tensor([ids], device=self.model.device)
        hidden = self.model.base_model(input_ids=tensor, use_cache=False).last_hidden_state[0]
        head = self.model.get_output_embeddings()
        softcap = getattr(self.model.config, "final_logit_softcapping", None)
        for start in range(0, len(ids) - 1, chunk):
            stop = min(start + chunk, len(ids) - 1)
            logits = head(hidden[start:stop]).float()
            if softcap:
                logits = torch.tanh(logits / softcap) * softcap
            log_p = torch.log_softmax(logits, dim=-1)
            nxt = tensor[0, start + 1 : stop + 1]
            out[start + 1 : stop + 1] = log_p.gather(1, nxt[:, None])[:, 0].cpu().numpy()
        return ids, offsets, out


def model_context_window(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> int | None:
    """Positions the model was trained for (config), or the tokenizer's limit where it is smaller
    (a tokenizer without one reports a huge sentinel)."""
    config = model.config
    sizes = [getattr(config, key, None) for key in ("max_position_embeddings", "n_positions", "max_sequence_length")]
    sizes.append(getattr(tokenizer, "model_max_length", None))
    sizes = [int(s) for s in sizes if isinstance(s, int) and 0 < s < 10_000_000]
    return min(sizes) if sizes else None
