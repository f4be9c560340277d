"""Last-layer attention read out of llama.cpp's own graph (DRAGIN on ``?backend=llama.cpp``).

llama.cpp builds, for every attention layer ``il``, the softmaxed scores as a graph tensor named
``kq_soft_max-<il>``, whose ggml shape (``ne``, fastest dimension first) is [n_kv, n_tokens, n_head]:
one row over the KV cells per evaluated token and head. It exists only with flash attention off
(the fused kernel never forms it), so the contexts here are made with it off. The scheduler's eval
callback (``llama_context_params.cb_eval``) is asked about each graph node before it is computed;
the last layer's tensor is asked for, and once computed its rows are read: each token's mean over
heads, cut to the cells it may see.

Columns are KV cells, not positions. One sequence whose cache is only ever cut at its end (which is
all ``Llama.eval`` does) fills the cells in position order, so the token at position p sees exactly
cells 0..p. Every row read is checked against the softmax's own mask (its second source tensor), and
refused with one line when the cells it sees are not those: a wrong row would mislead DRAGIN silently.

Python is asked about every node (about 1100 a token for a 30-layer model): measured on smollm2,
up to a millisecond a token while not reading and about 1.7 ms (9%) while reading. So a decoding
context gets the callback only once attention is first asked for; plain decoding never pays it.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable, Sequence

import numpy as np

from dynrag.errors import DynragError

FIX = "use backend=transformers for attention"
# ggml's ggml_object header precedes every tensor in a context's memory; ggml_tensor_overhead()
# reports the two together, which checks the struct below against the library's.
GGML_OBJECT_SIZE = 32
GGML_DTYPES = {0: np.float32, 1: np.float16}
# Cells a scratch context grows by (llama.cpp pads contexts to 256).
SCRATCH_STEP = 256


def padded_cells(cells: int) -> int:
    """``cells`` (at least one) rounded up to a whole number of ``SCRATCH_STEP``s."""
    return -(-max(cells, 1) // SCRATCH_STEP) * SCRATCH_STEP


class GgmlTensor(ctypes.Structure):
    """``struct ggml_tensor`` of ggml.h (GGML_MAX_DIMS 4, GGML_MAX_SRC 10, 64-byte names), as the
    installed llama-cpp-python builds it; ``check_layout`` confirms it against the library."""

    _fields_ = [
        ("type", ctypes.c_int), ("buffer", ctypes.c_void_p),
        ("ne", ctypes.c_int64 * 4), ("nb", ctypes.c_size_t * 4),
        ("op", ctypes.c_int), ("op_params", ctypes.c_int32 * 16), ("flags", ctypes.c_int32),
        ("src", ctypes.c_void_p * 10), ("view_src", ctypes.c_void_p), ("view_offs", ctypes.c_size_t),
        ("data", ctypes.c_void_p), ("name", ctypes.c_char * 64), ("extra", ctypes.c_void_p),
        ("padding", ctypes.c_char * 8),
    ]


NAME_OFFSET = GgmlTensor.name.offset


def _ggml() -> Any:
    """libggml with the few functions used here declared."""
    from llama_cpp._ggml import libggml

    libggml.ggml_tensor_overhead.restype = ctypes.c_size_t
    libggml.ggml_get_name.argtypes = [ctypes.c_void_p]
    libggml.ggml_get_name.restype = ctypes.c_void_p
    libggml.ggml_get_data.argtypes = [ctypes.c_void_p]
    libggml.ggml_get_data.restype = ctypes.c_void_p
    libggml.ggml_nbytes.argtypes = [ctypes.c_void_p]
    libggml.ggml_nbytes.restype = ctypes.c_size_t
    libggml.ggml_backend_buffer_is_host.argtypes = [ctypes.c_void_p]
    libggml.ggml_backend_buffer_is_host.restype = ctypes.c_bool
    libggml.ggml_backend_tensor_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
    libggml.ggml_backend_tensor_get.restype = None
    return libggml


def check_layout(address: int) -> None:
    """Refuse when this GgmlTensor does not match the loaded ggml (a llama-cpp-python built
    against another ggml.h): reading through it would give garbage."""
    lib = _ggml()
    tensor = GgmlTensor.from_address(address)
    same = lib.ggml_get_name(address) == address + NAME_OFFSET and lib.ggml_get_data(address) == tensor.data
    if not same:
        raise DynragError(f"llama.cpp ggml_tensor: its layout is not the one ggml.h gives here "
                          f"(a llama-cpp-python built from another llama.cpp; {FIX})")


def tensor_array(address: int) -> np.ndarray:
    """A float32 copy of a ggml tensor, numpy shape (ne3, ne2, ne1, ne0), from host memory
    directly or, on a device buffer, through ggml_backend_tensor_get."""
    tensor = GgmlTensor.from_address(address)
    dtype = GGML_DTYPES.get(tensor.type)
    if dtype is None:
        raise DynragError(f"llama.cpp tensor {tensor.name.decode()}: ggml type {tensor.type} (float32 or float16 expected)")
    lib = _ggml()
    size = lib.ggml_nbytes(address)
    if lib.ggml_backend_buffer_is_host(tensor.buffer):
        raw = (ctypes.c_char * size).from_address(tensor.data)
    else:
        raw = (ctypes.c_char * size)()
        lib.ggml_backend_tensor_get(address, raw, 0, size)
    view = np.ndarray(tuple(tensor.ne)[::-1], dtype=dtype, buffer=raw, strides=tuple(tensor.nb)[::-1])
    return view.astype(np.float32)


def rows_of(probs: np.ndarray, positions: Sequence[int], per_head: bool = False) -> list[np.ndarray]:
    """Attention rows of the tokens at ``positions`` from one evaluation's softmax ``probs``
    (n_head, n_tokens, n_kv): row i is token i's mean over heads (with ``per_head``, its
    (n_head, p + 1) slice) over cells 0..p, p its position; the cells after p are padding or
    later tokens, masked out."""
    rows = []
    for i, p in enumerate(positions):
        kept = probs[:, i, : p + 1]
        rows.append(kept.copy() if per_head else kept.mean(axis=0, dtype=np.float64).astype(np.float32))
    return rows


def misplaced(visible: np.ndarray, positions: Sequence[int]) -> int | None:
    """Index of the first token whose visible cells (a (n_tokens, n_kv) boolean mask) are not
    exactly cells 0..p, p its position; None when every token's are."""
    expected = np.arange(visible.shape[1])[None, :] <= np.asarray(positions)[:, None]
    wrong = np.flatnonzero((visible != expected).any(axis=1))
    return int(wrong[0]) if wrong.size else None


def shape_problem(name: str, ne: Sequence[int], n_head: int) -> str | None:
    """Why a tensor's ggml shape is not [n_kv, n_tokens, n_head] (one stream), or None."""
    n_kv, n_tokens, heads, streams = (int(n) for n in ne)
    if heads == n_head and streams == 1 and n_kv >= n_tokens >= 1:
        return None
    return (f"llama.cpp tensor {name}: shape {[n_kv, n_tokens, heads, streams]}, not [n_kv, n_tokens, {n_head}, 1] "
            f"(n_kv cells, a row per token, a slice per head; {FIX})")


class GraphTap:
    """An eval callback that takes one named graph tensor each time it is computed while armed
    (``armed``); what taking it means is the subclass's ``_take``. One per model, shared by its
    contexts."""

    def __init__(self, name: str = ""):
        import llama_cpp

        self.name = name  # sets the key asked about (a property: the callback runs for every graph node)
        self._armed = False
        self._error: str | None = None
        self._layout_checked = False
        # Kept here: ctypes frees a callback's C trampoline with its Python object.
        self.callback = llama_cpp.ggml_backend_sched_eval_callback(self._on_tensor)

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, name: str) -> None:
        self._name, self._key = name, name.encode() + b"\0"

    def _on_tensor(self, address: int, ask: bool, _user_data: Any) -> bool:
        if ask:
            return self._armed and ctypes.string_at(address + NAME_OFFSET, len(self._key)) == self._key
        try:
            if self._error is None:
                if not self._layout_checked:
                    check_layout(address)
                    self._layout_checked = True
                self._take(address)
        except Exception as exc:  # an exception cannot cross the C callback: it is raised after the evaluation
            self._error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return True  # False would stop the rest of the graph

    def _take(self, address: int) -> None:
        raise NotImplementedError

    def armed(self, run: Callable[[], None]) -> None:
        """``run`` with the tensor taken; what went wrong in the callback is raised here."""
        self._armed, self._error = True, None
        try:
            run()
        finally:
            self._armed = False
        if self._error is not None:
            raise DynragError(self._error)


class GraphAttention(GraphTap):
    """The eval callback that reads the last layer's ``kq_soft_max`` rows while it is armed (see
    ``evaluate``); one per model, shared by its contexts."""

    def __init__(self, n_layer: int, n_head: int):
        super().__init__(f"kq_soft_max-{n_layer - 1}")
        self.n_head = n_head
        self._rows: list[np.ndarray] = []
        self._next = 0
        self._per_head = False

    def _take(self, address: int) -> None:
        tensor = GgmlTensor.from_address(address)
        problem = shape_problem(self.name, tensor.ne, self.n_head)
        if problem:
            raise DynragError(problem)
        n_kv, n_tokens = int(tensor.ne[0]), int(tensor.ne[1])
        positions = range(self._next, self._next + n_tokens)
        if not tensor.src[1]:
            raise DynragError(f"llama.cpp tensor {self.name}: its softmax has no mask to tell the cells apart ({FIX})")
        mask = tensor_array(tensor.src[1]).reshape(-1, n_kv)[:n_tokens]
        wrong = misplaced(mask > -np.inf, positions)
        if wrong is not None:
            raise DynragError(
                f"llama.cpp tensor {self.name}: the token at position {positions[wrong]} sees "
                f"{int((mask[wrong] > -np.inf).sum())} KV cells, not cells 0..{positions[wrong]} "
                f"(one sequence held in position order is expected; {FIX})")
        probs = tensor_array(address)[0]
        self._rows.extend(rows_of(probs, positions, self._per_head))
        self._next += n_tokens

    def evaluate(self, run: Callable[[], None], first_position: int, n_tokens: int,
                 per_head: bool = False) -> list[np.ndarray]:
        """The rows of the ``n_tokens`` tokens that ``run`` evaluates from ``first_position`` on."""
        rows: list[np.ndarray] = []
        self._rows, self._next, self._per_head = rows, first_position, per_head
        self.armed(run)
        if len(rows) != n_tokens:
            raise DynragError(
                f"llama.cpp tensor {self.name}: {len(rows)} attention rows for {n_tokens} tokens evaluated "
                f"(flash attention fuses the tensor away; another llama.cpp build may name it otherwise; {FIX})")
        return rows


class LlamaGraphReader:
    """Attention from the graph of a ``llama_cpp.Llama`` (flash attention off): rows of tokens it
    decodes in its own context, and passes over given tokens in a scratch context of the same model,
    so the decoding context keeps its cache."""

    def __init__(self, llama: Any, graph: GraphAttention | None = None):
        import llama_cpp

        model = llama._model.model
        self.llama = llama
        # given: a graph expected to hold another tensor (a test of the refusals)
        self.graph = graph or GraphAttention(llama_cpp.llama_model_n_layer(model), llama_cpp.llama_model_n_head(model))
        self._attached = False
        self._scratch: Any = None

    def _params(self, n_ctx: int | None = None) -> Any:
        import llama_cpp

        base = self.llama.context_params
        params = type(base).from_buffer_copy(base)
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.cb_eval = self.graph.callback
        params.cb_eval_user_data = None
        if n_ctx is not None:
            params.n_ctx = n_ctx
            params.n_batch = params.n_ubatch = min(n_ctx, int(base.n_batch))
        return params

    def check(self) -> None:
        """Evaluate two tokens in the scratch context: refuses (one line naming the tensor) when
        the graph has no such tensor, another shape, or rows that do not fit the positions."""
        if _ggml().ggml_tensor_overhead() != ctypes.sizeof(GgmlTensor) + GGML_OBJECT_SIZE:
            raise DynragError(f"llama.cpp ggml_tensor: its size is not the one ggml.h gives here "
                              f"(a llama-cpp-python built from another llama.cpp; {FIX})")
        token = max(int(self.llama.token_bos()), 0)
        rows = self.pass_rows([token, token])
        if [len(r) for r in rows] != [1, 2] or not all(abs(float(r.sum()) - 1) < 1e-3 for r in rows):
            raise DynragError(f"llama.cpp tensor {self.graph.name}: its rows are no softmax over earlier positions ({FIX})")

    def attach(self) -> None:
        """Give the decoding context the callback: made anew, so its cache starts empty once."""
        if self._attached:
            return
        from llama_cpp import _internals

        llama = self.llama
        params = self._params()
        llama._ctx.close()
        llama._ctx = _internals.LlamaContext(model=llama._model, params=params, verbose=llama.verbose)
        llama.context_params = params
        llama.n_tokens = 0
        self._attached = True

    def decode_rows(self, token_ids: Sequence[int]) -> list[np.ndarray]:
        """``Llama.eval`` of ``token_ids`` after what the context holds, with each one's row."""
        self.attach()
        ids = list(token_ids)
        return self.graph.evaluate(lambda: self.llama.eval(ids), int(self.llama.n_tokens), len(ids))

    def pass_rows(self, token_ids: Sequence[int], per_head: bool = False) -> list[np.ndarray]:
        """Each token's row from one pass over ``token_ids`` alone (positions 0..T-1)."""
        import llama_cpp
        from llama_cpp import _internals

        ids = list(token_ids)
        if self._scratch is None or self._scratch.n_ctx() < len(ids):
            if self._scratch is not None:
                self._scratch.close()
            self._scratch = _internals.LlamaContext(model=self.llama._model, params=self._params(padded_cells(len(ids))),
                                                    verbose=False)
        context = self._scratch
        llama_cpp.llama_memory_clear(context.memory, True)
        step = int(context.params.n_batch)

        def run() -> None:
            batch = _internals.LlamaBatch(n_tokens=step, embd=0, n_seq_max=1, verbose=False)
            try:
                for start in range(0, len(ids), step):
                    batch.set_batch(ids[start : start + step], n_past=start, logits_all=False)
                    context.decode(batch)
            finally:
                batch.close()

        return self.graph.evaluate(run, 0, len(ids), per_head)


def square(rows: list[np.ndarray], skip: int, per_head: bool = False, n_head: int = 1) -> np.ndarray:
    """The (T, T) matrix (with ``per_head``, (heads, T, T)) of the rows of T tokens, each row padded
    with zeros after its own position, the first ``skip`` tokens (a BOS put in front) dropped."""
    t = len(rows)
    matrix = np.zeros((n_head, t, t) if per_head else (t, t), dtype=np.float32)
    for i, row in enumerate(rows):
        matrix[..., i, : row.shape[-1]] = row
    return matrix[..., skip:, skip:]
