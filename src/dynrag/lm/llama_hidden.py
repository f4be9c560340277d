"""SeaKR's sampled hidden states on ``?backend=llama.cpp``, read out of llama.cpp's own graph.

For every decoder block ``il`` llama.cpp names two graph tensors that are the two representations
lm/hidden.py reads from transformers: ``ffn_out-<il>``, the block's feed-forward output before it
joins the residual stream, and ``l_out-<il>``, the residual stream after the block. Each has ggml
shape [n_embd, n_tokens]: one row per token of the evaluated batch. The scheduler's eval callback
(see lm/llama_graph_attention.py) asks for the chosen one only while a sampling step is evaluated,
so the prompt's prefill pays nothing for it.

The n continuations decode together, as on transformers. The prompt is not evaluated again: the
decoding context holds it (it has just written the greedy step from it, reusing its cache as
always), and its cells are copied as sequence 0 of a scratch context whose cache is unified across
sequences (``llama_state_seq_get_data``/``set_data``), then shared with sequences 1..n-1
(``llama_memory_seq_cp``). Each step evaluates one batch holding the next token of every live row;
a finished row leaves the batch. What the draws see differs from transformers only in the logits
(the quantised weights'), so the samples differ, not the procedure.

Determinism: the seed fixes the draws for a given cache. As with greedy decoding on this backend
(and the transformers backend's prefix cache), a prompt whose prefix was evaluated in other batches
before may differ in the last bits of its cache, which can change a draw at a near tie.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable, Sequence

import numpy as np

from dynrag.errors import ConfigError, DynragError
from dynrag.lm.base import HiddenSamples
from dynrag.lm.hidden import resolve_layer
from dynrag.lm.llama_graph_attention import GraphTap, padded_cells, tensor_array

GRAPH_NAMES = {"ffn": "ffn_out", "residual": "l_out"}


def cells_needed(prompt_tokens: int, n: int, max_new_tokens: int) -> int:
    """KV cells for a prompt shared by ``n`` rows that each add up to ``max_new_tokens`` and the
    EOS read after them, rounded up to llama.cpp's padding."""
    return padded_cells(prompt_tokens + n * (max_new_tokens + 1))


class GraphRows(GraphTap):
    """The eval callback that copies one named tensor's rows, one per evaluated token, while armed."""

    def __init__(self) -> None:
        super().__init__()
        self._rows: list[np.ndarray] = []

    def _take(self, address: int) -> None:
        values = tensor_array(address)
        self._rows.append(values.reshape(-1, values.shape[-1]))

    def evaluate(self, run: Callable[[], None], name: str, n_tokens: int) -> np.ndarray:
        """The (n_tokens, n_embd) rows of tensor ``name`` while ``run`` evaluates one batch."""
        self.name, self._rows = name, []
        self.armed(run)
        rows = self._rows
        if len(rows) != 1 or rows[0].shape[0] != n_tokens:
            got = "no such tensor" if not rows else f"{sum(r.shape[0] for r in rows)} rows in {len(rows)} tensors"
            raise DynragError(f"llama.cpp tensor {name}: {got} for a batch of {n_tokens} tokens (another llama.cpp "
                              "build may name it otherwise; use backend=transformers for hidden states)")
        return rows[0]


class LlamaHiddenSampler:
    """Continuations sampled together from one prompt in a scratch context of a ``llama_cpp.Llama``
    (its decoding context keeps its cache), with one block's state after each."""

    def __init__(self, llama: Any):
        import llama_cpp

        self.llama = llama
        self.n_layer = int(llama_cpp.llama_model_n_layer(llama._model.model))
        self.graph = GraphRows()
        self._context: Any = None

    def _scratch(self, n: int, cells: int) -> Any:
        import llama_cpp
        from llama_cpp import _internals

        most = int(llama_cpp.llama_max_parallel_sequences())
        if n > most:
            raise ConfigError(f"samples={n}: llama.cpp decodes at most {most} sequences together")
        context = self._context
        if context is not None and int(context.params.n_seq_max) >= n and context.n_ctx() >= cells:
            return context
        # grown, never shrunk: SeaKR's calls alternate between short and long prompts
        had_cells, had_rows = (context.n_ctx(), int(context.params.n_seq_max)) if context is not None else (0, 1)
        if context is not None:
            context.close()
            self._context = None
        base = self.llama.context_params
        params = type(base).from_buffer_copy(base)
        params.n_ctx = max(cells, had_cells)
        params.n_seq_max = max(n, had_rows)
        params.kv_unified = True  # the prompt's cells are shared by every row
        params.n_batch = params.n_ubatch = params.n_seq_max  # one token a row: the prompt comes evaluated
        params.cb_eval = self.graph.callback
        params.cb_eval_user_data = None
        self._context = _internals.LlamaContext(model=self.llama._model, params=params, verbose=False)
        return self._context

    def _take_prompt(self, context: Any) -> None:
        """Sequence 0 of the scratch context made a copy of the decoding context's one sequence
        (the prompt, just evaluated there), every other sequence emptied."""
        import llama_cpp

        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(context.ctx), True)
        source = self.llama._ctx.ctx
        size = int(llama_cpp.llama_state_seq_get_size(source, 0))
        buffer = (ctypes.c_uint8 * size)()
        copied = int(llama_cpp.llama_state_seq_get_data(source, buffer, size, 0))
        if copied != size or int(llama_cpp.llama_state_seq_set_data(context.ctx, buffer, size, 0)) == 0:
            raise DynragError(f"llama.cpp could not copy the prompt's cache ({size} bytes) into the sampling context "
                              "(use backend=transformers for hidden states)")

    def _logits_view(self, context: Any, batch_index: int) -> np.ndarray:
        """The batch token's next-token logits in llama.cpp's own buffer: valid until the next
        decode, so a caller copies what it keeps."""
        import llama_cpp

        raw = llama_cpp.llama_get_logits_ith(context.ctx, batch_index)
        return np.ctypeslib.as_array(raw, shape=(int(self.llama.n_vocab()),))

    def sample(self, prompt_ids: list[int], logits: np.ndarray, *, n: int, layer: int | None, max_new_tokens: int,
               stop: Sequence[str], representation: str, temperature: float, top_k: int, top_p: float, seed: int,
               ends: Callable[[int], bool], eos_feed: int, decode: Callable[[list[int]], str]) -> HiddenSamples:
        """``n`` continuations of ``prompt_ids``, which the decoding context holds (and nothing
        else), whose next-token ``logits`` are given; the chosen block's state at the EOS fed after
        each (lm/hidden.SampledRows says where a row ends)."""
        import llama_cpp
        import torch
        from llama_cpp import _internals

        from dynrag.lm.hidden import SampledRows, check_representation, draw_tokens

        check_representation(representation)
        name = f"{GRAPH_NAMES[representation]}-{resolve_layer(self.n_layer, layer)}"
        context = self._scratch(n, cells_needed(len(prompt_ids), n, max_new_tokens))
        self._take_prompt(context)
        first = torch.from_numpy(np.asarray(logits, dtype=np.float32))
        memory = llama_cpp.llama_get_memory(context.ctx)
        for seq in range(1, n):
            llama_cpp.llama_memory_seq_cp(memory, 0, seq, -1, -1)
        generator = torch.Generator(device="cpu").manual_seed(seed)
        sampled = SampledRows(n, ends, eos_feed, max_new_tokens, stop, decode)
        step_logits = first.reshape(1, -1).repeat(n, 1)
        batch = _internals.LlamaBatch(n_tokens=max(n, 1), embd=0, n_seq_max=1, verbose=False)
        try:
            for position in range(len(prompt_ids), len(prompt_ids) + max_new_tokens):
                live = sampled.live()
                feed, ending = sampled.step(draw_tokens(step_logits, temperature, top_k, top_p, generator).tolist())
                fill_batch(batch.batch, [(row, feed[row]) for row in live], position)
                states = self.graph.evaluate(lambda: context.decode(batch), name, len(live))
                for j, row in enumerate(live):
                    if row in ending:
                        sampled.finish(row, states[j])
                    else:
                        step_logits[row] = torch.from_numpy(self._logits_view(context, j))  # copied in
                if not sampled.live():
                    break
        finally:
            batch.close()
        return sampled.samples()


def fill_batch(batch: Any, rows: list[tuple[int, int]], position: int) -> None:
    """A ``llama_batch`` of one token per (sequence, token) pair, all at ``position``, each with logits."""
    batch.n_tokens = len(rows)
    for j, (seq, token) in enumerate(rows):
        batch.token[j] = token
        batch.pos[j] = position
        batch.n_seq_id[j] = 1
        batch.seq_id[j][0] = seq
        batch.logits[j] = True
