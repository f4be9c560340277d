"""Continuous batching for the transformers backend: one forward pass decodes every row in flight.

Callers on many threads (one question each) ask for generations; one engine thread owns the
model. Between decode steps it admits waiting requests — each prompt is prefilled alone, reusing
the pinned instruction-and-exemplars prefix and recent caches as a lone call would — and runs the
other model calls it was handed (next-token scores, attention passes) in order. Each step feeds
the newest token of every row in one pass over a left-padded cache (lm/batch_cache.py) with
per-row positions and mask; each row then applies its own stops, ``stop_when`` callback, entropies
and attention capture (lm/row_decode.py, the code a lone call runs). A finished row leaves at once
and its caller gets its Generation, while the others decode on.

Bounded memory: at most ``max_rows`` rows decode together, and a prompt is admitted only while the
padded batch stays within ``max_cached_tokens`` positions; beyond that requests wait in order.
Prompt-lookup drafts are not used in batches (rows would feed different numbers of tokens); a
request that finds the engine idle, with nothing else waiting, decodes alone with drafts.

``start_together(n)`` holds generations back until ``n`` of them wait, then admits them in one
go. Which rows overlap otherwise depends on how fast the callers' threads arrive, so a check that
needs rows to decode together (a test, the GPU check) sets the gate instead of hoping.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch

from dynrag.lm.base import Generation, Prompt
from dynrag.lm.batch_cache import BatchCache
from dynrag.lm.row_decode import RowDecoder
from dynrag.lm.stopping import StopWhen

DEFAULT_MAX_ROWS = 8
CACHED_TOKENS_PER_ROW = 2_048  # the default cap on padded positions, per row (SmolLM2-135M: ~46 KB each)


@dataclass
class GenerateRequest:
    prompt: Prompt
    max_new_tokens: int
    stop: Sequence[str] = ()
    capture_attention: bool = False
    stop_after: Sequence[str] = ()
    stop_when: StopWhen | None = None
    future: Future = field(default_factory=Future)
    encoded: tuple[list[int], list[tuple[int, int]]] | None = None


@dataclass
class CallRequest:
    fn: Callable[[], Any]
    future: Future = field(default_factory=Future)


@dataclass
class _Row:
    request: GenerateRequest
    decoder: RowDecoder
    fed: list[int]  # tokens the row's cache holds
    next_token: int
    final_feed: bool = False  # fed only for the last kept token's attention row, then done


@dataclass
class EngineStats:
    steps: int = 0  # batched forward passes
    row_steps: int = 0  # rows decoded, summed over steps
    peak_rows: int = 0
    peak_cached_tokens: int = 0
    solo: int = 0  # generations decoded alone (engine idle), with drafts
    # Seconds on the engine thread: batched forward passes, prefills (admission), the rows' own
    # per-token work (choosing tokens, stops, callbacks) and the batch cache's joins and leaves.
    forward_seconds: float = 0.0
    prefill_seconds: float = 0.0
    row_seconds: float = 0.0
    cache_seconds: float = 0.0


class BatchEngine:
    def __init__(self, lm: Any, max_rows: int = DEFAULT_MAX_ROWS, max_cached_tokens: int | None = None):
        if max_rows < 1:
            raise ValueError("max_rows must be at least 1")
        self.lm, self.max_rows = lm, max_rows
        self.max_cached_tokens = max_cached_tokens if max_cached_tokens is not None else max_rows * CACHED_TOKENS_PER_ROW
        self.stats = EngineStats()
        self._waiting: deque[GenerateRequest | CallRequest] = deque()
        self._wake = threading.Condition()
        self._rows: list[_Row] = []
        self._batch = BatchCache()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._gate: int | None = None  # generations to gather before the first admission

    def start_together(self, rows: int) -> None:
        """Admit no generation until ``rows`` of them wait (once); other model calls run meanwhile.
        Set it before submitting; fewer than ``rows`` generations ever arriving would wait forever."""
        if not 1 <= rows <= self.max_rows:
            raise ValueError(f"start_together({rows}): between 1 and max_rows ({self.max_rows})")
        with self._wake:
            self._gate = rows

    # ---- the callers' side ----------------------------------------------------------------------

    def generate(self, prompt: str | Prompt, max_new_tokens: int, stop: Sequence[str] = (),
                 capture_attention: bool = False, stop_after: Sequence[str] = (),
                 stop_when: StopWhen | None = None) -> Generation:
        if threading.current_thread() is self._thread:  # a callback asking again: no deadlock
            return self.lm.generate(prompt, max_new_tokens, stop, capture_attention, stop_after, stop_when)
        return self.submit(prompt, max_new_tokens, stop, capture_attention, stop_after, stop_when).result()

    def submit(self, prompt: str | Prompt, max_new_tokens: int, stop: Sequence[str] = (),
               capture_attention: bool = False, stop_after: Sequence[str] = (),
               stop_when: StopWhen | None = None) -> Future:
        """Queue a generation; its future gets the Generation (or the error that ended it).
        Batched rows decode greedily: a model inside ``sampled()`` is refused here."""
        if getattr(self.lm, "sampling", None) is not None:
            raise RuntimeError("the batching engine decodes greedily only; sample without batching (one row at a time)")
        return self._submit(GenerateRequest(Prompt.of(prompt), max_new_tokens, tuple(stop), capture_attention,
                                            tuple(stop_after), stop_when))

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` (which uses the model) on the engine thread between decode steps."""
        if threading.current_thread() is self._thread:
            return fn()
        return self._submit(CallRequest(fn)).result()

    def _submit(self, request: GenerateRequest | CallRequest) -> Future:
        with self._wake:
            if self._closed:
                raise RuntimeError("the batching engine is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="dynrag-batch", daemon=True)
                self._thread.start()
            self._waiting.append(request)
            self._wake.notify()
        return request.future

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    # ---- the engine thread ----------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._rows and not self._closed and not self._has_work():
                    self._wake.wait()
                if self._closed and not self._waiting and not self._rows:
                    return
                held = self._gate_holds()
            with torch.inference_mode():
                if held:
                    self._run_calls_only()
                else:
                    self._admit()
                if self._rows:
                    self._step()

    def _gate_holds(self) -> bool:
        """Under the engine's lock: True while the gate holds generations back; it opens for good
        once enough wait (or the engine closes)."""
        if self._gate is not None and (
                self._closed or sum(isinstance(r, GenerateRequest) for r in self._waiting) >= self._gate):
            self._gate = None
        return self._gate is not None

    def _has_work(self) -> bool:
        """Under the engine's lock: is anything waiting that the gate lets through?"""
        if self._gate_holds():
            return any(isinstance(r, CallRequest) for r in self._waiting)
        return bool(self._waiting)

    def _run_calls_only(self) -> None:
        """While generations gather: run the waiting model calls, whatever their place in the queue
        (a caller blocked on one may be the one whose generation the gate waits for)."""
        with self._wake:
            calls = [r for r in self._waiting if isinstance(r, CallRequest)]
            for call in calls:
                self._waiting.remove(call)
        for call in calls:
            _settle(call.future, call.fn)

    def _next_waiting(self) -> GenerateRequest | CallRequest | None:
        with self._wake:
            return self._waiting[0] if self._waiting else None

    def _pop_waiting(self) -> None:
        with self._wake:
            self._waiting.popleft()

    def _admit(self) -> None:
        """Admit waiting requests in order while rows and cached positions allow."""
        joined = []
        while len(self._rows) + len(joined) < self.max_rows:
            request = self._next_waiting()
            if request is None:
                break
            if isinstance(request, CallRequest):
                self._pop_waiting()
                _settle(request.future, request.fn)
                continue
            if request.encoded is None:
                request.encoded = self.lm.encode_prompt(request.prompt)
            rows = len(self._rows) + len(joined)
            width = max([self._batch.width, len(request.encoded[0]), *(len(r.fed) for r, _ in joined)])
            if rows and (rows + 1) * width > self.max_cached_tokens:
                break
            self._pop_waiting()
            if not rows and not self._rows and self._next_waiting() is None and self.lm.draft_tokens > 0:
                self.stats.solo += 1  # alone: decode it the one-row way, drafts and all
                _settle(request.future, lambda r=request: self.lm.generate(
                    r.prompt, r.max_new_tokens, r.stop, r.capture_attention, r.stop_after, r.stop_when))
                continue
            started = time.perf_counter()
            row = self._prefill(request)
            self.stats.prefill_seconds += time.perf_counter() - started
            if row is not None:
                joined.append(row)
        if joined:
            started = time.perf_counter()
            self._batch.add([cache for _, cache in joined])
            self.stats.cache_seconds += time.perf_counter() - started
            self._rows.extend(row for row, _ in joined)
            self._note_size()

    def _prefill(self, request: GenerateRequest) -> tuple[_Row, Any] | None:
        """Prefill one request alone; the row to join (with its one-row cache), or None when it
        ended on its first token (then it is answered here)."""
        lm = self.lm
        prompt_ids, offsets = request.encoded
        try:
            lm._recorder.reset(active=False)
            cache, logits = lm.prefill(request.prompt, prompt_ids, offsets)
            decoder = RowDecoder(lm.tokenizer, lm.eos_token_ids, request.prompt, prompt_ids, offsets,
                                 request.max_new_tokens, request.stop, request.stop_after, request.stop_when,
                                 attention_rows=[])
            token = decoder.take(logits) if not decoder.done else None
        except BaseException as exc:  # noqa: BLE001 - the caller gets it
            request.future.set_exception(exc)
            return None
        row = _Row(request, decoder, list(prompt_ids), token if token is not None else -1)
        if token is None:
            if not (request.capture_attention and decoder.needs_last_row()):
                lm._kv.store(row.fed, cache)
                request.future.set_result(decoder.generation([] if request.capture_attention else None))
                return None
            row.next_token, row.final_feed = decoder.token_ids[-1], True
        return row, cache

    def _step(self) -> None:
        lm, batch, rows = self.lm, self._batch, self._rows
        capture = any(r.request.capture_attention for r in rows)
        inputs = torch.tensor([[r.next_token] for r in rows], device=lm.model.device)
        positions = torch.tensor([[n] for n in batch.lengths], device=lm.model.device)
        mask = batch.mask(extra=1)
        lm._recorder.reset(active=capture, batched=True)
        started = time.perf_counter()
        try:
            logits = lm.model(input_ids=inputs, attention_mask=mask, position_ids=positions, cache=batch.cache,
                              use_cache=True, logits_to_keep=1).logits[:, -1]
        except BaseException as exc:  # noqa: BLE001 - every row of the pass fails with it
            for r in rows:
                r.request.future.set_exception(exc)
            self._rows, self._batch = [], BatchCache()
            return
        finally:
            attention = lm._recorder.batch_rows
            lm._recorder.reset(active=False)
        batch.grew()
        decoded = time.perf_counter()
        self.stats.forward_seconds += decoded - started
        self.stats.steps += 1
        self.stats.row_steps += len(rows)
        keep: list[int] = []
        for b, row in enumerate(rows):
            row.fed.append(row.next_token)
            request = row.request
            if request.capture_attention and attention is not None:
                row.decoder.attention_rows.append(np.ascontiguousarray(attention[b, -batch.lengths[b]:]))
            if row.final_feed:
                self._finish(b, row)
                continue
            try:
                token = row.decoder.take(logits[b])
            except BaseException as exc:  # noqa: BLE001 - a callback's error (or a cancel) ends its row only
                request.future.set_exception(exc)
                continue
            if token is not None:
                row.next_token = token
                keep.append(b)
            elif request.capture_attention and row.decoder.needs_last_row():
                row.next_token, row.final_feed = row.decoder.token_ids[-1], True
                keep.append(b)
            else:
                self._finish(b, row)
        left = time.perf_counter()
        self.stats.row_seconds += left - decoded
        if len(keep) < len(rows):
            self._rows = [rows[b] for b in keep]
            batch.keep(keep)
            self.stats.cache_seconds += time.perf_counter() - left

    def _finish(self, b: int, row: _Row) -> None:
        request, decoder = row.request, row.decoder
        if self.lm.kv_reuse == "recent":
            self.lm._kv.store(row.fed, self._batch.row(b))
        attention = decoder.attention_rows[: len(decoder.token_ids)] if request.capture_attention else None
        request.future.set_result(decoder.generation(attention))

    def _note_size(self) -> None:
        self.stats.peak_rows = max(self.stats.peak_rows, len(self._rows))
        self.stats.peak_cached_tokens = max(self.stats.peak_cached_tokens, self._batch.cached_tokens)


def _settle(future: Future, fn: Callable[[], Any]) -> None:
    try:
        future.set_result(fn())
    except BaseException as exc:  # noqa: BLE001 - the caller gets it
        future.set_exception(exc)
