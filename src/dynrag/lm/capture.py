"""Last-layer attention capture during decoding, keeping the fast attention kernel everywhere.

Every layer runs transformers' sdpa kernel. The last layer, when its recorder is active, also
computes softmax(QK^T * scaling + mask) for the newest query rows and keeps their mean over heads.
This avoids asking the model for every layer's attentions (costly, and empty under sdpa in transformers 5) and a
second forward pass. The recorder hangs on the model's own last attention module: no global state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

CAPTURE_IMPLEMENTATION = "dynrag_last_layer_capture"
RECORDER_ATTRIBUTE = "_dynrag_recorder"


@dataclass
class AttentionRecorder:
    active: bool = False
    # When False only the newest query row of each forward call is kept (decoding); when True every
    # query row of the call is kept (used for a pass over a whole text).
    all_rows: bool = False
    per_head: bool = False  # keep (heads, kv) rows instead of the mean over heads
    rows: list[np.ndarray] = field(default_factory=list)
    # Batched decoding (lm/batch_engine.py): the newest query row of every batch row is kept, as
    # one (batch, kv) array per forward call in ``batch_rows`` (padding columns included).
    batched: bool = False
    batch_rows: np.ndarray | None = None

    def reset(self, active: bool, all_rows: bool = False, per_head: bool = False, batched: bool = False) -> None:
        self.active, self.all_rows, self.per_head, self.rows = active, all_rows, per_head, []
        self.batched, self.batch_rows = batched, None


def attention_probabilities(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None,
    softcap: float | None = None,
    per_head: bool = False,
    batch: bool = False,
) -> torch.Tensor:
    """Softmax attention of batch 0 for the given query rows: mean over heads (q_len, kv_len), or
    with `per_head` (q_len, heads, kv_len); with `batch`, of every batch row: (batch, q_len, kv_len)."""
    key = repeat_kv(key, getattr(module, "num_key_value_groups", 1))
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    b = query.shape[0] if batch else 1
    scores = torch.matmul(query[:b].float(), key[:b].float().transpose(2, 3)) * scaling
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    q_len, kv_len = scores.shape[-2], scores.shape[-1]
    if attention_mask is None:
        # sdpa passes no mask when plain causal masking applies: query rows are the last q_len positions.
        q_pos = torch.arange(kv_len - q_len, kv_len, device=scores.device)[:, None]
        allowed = q_pos >= torch.arange(kv_len, device=scores.device)[None, :]
        scores = scores.masked_fill(~allowed, float("-inf"))
    else:
        mask = attention_mask[:b, :, -q_len:, :kv_len]
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask.float()
    if batch:
        return torch.softmax(scores, dim=-1).mean(dim=1)
    probs = torch.softmax(scores, dim=-1)[0]
    return probs.transpose(0, 1) if per_head else probs.mean(dim=0)


def capture_attention_forward(module, query, key, value, attention_mask, scaling=None, **kwargs):
    output = sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, **kwargs)
    recorder: AttentionRecorder | None = getattr(module, RECORDER_ATTRIBUTE, None)
    if recorder is not None and recorder.active and recorder.batched:
        probs = attention_probabilities(module, query[:, :, -1:, :], key, attention_mask, scaling,
                                        kwargs.get("softcap"), batch=True)
        recorder.batch_rows = probs[:, 0].cpu().numpy()
    elif recorder is not None and recorder.active:
        rows_query = query if recorder.all_rows else query[:, :, -1:, :]
        probs = attention_probabilities(
            module, rows_query, key, attention_mask, scaling, kwargs.get("softcap"), recorder.per_head
        )
        first = key.shape[2] - probs.shape[0]  # absolute position of the first query row
        recorder.rows.extend(row[..., : first + i + 1].cpu().numpy().copy() for i, row in enumerate(probs))
    return output


def _register() -> None:
    AttentionInterface.register(CAPTURE_IMPLEMENTATION, capture_attention_forward)
    # Without the matching mask function, sliding-window layers (Gemma 3) get a wrong mask.
    AttentionMaskInterface.register(CAPTURE_IMPLEMENTATION, sdpa_mask)


_register()


def install_recorder(model: torch.nn.Module) -> AttentionRecorder:
    """Switch the model to the capturing kernel and attach a recorder to its last attention layer."""
    model.set_attn_implementation(CAPTURE_IMPLEMENTATION)
    attention_modules = [
        m for m in model.modules() if hasattr(m, "layer_idx") and hasattr(m, "num_key_value_groups")
    ]
    if not attention_modules:
        raise ValueError(f"{type(model).__name__}: no attention layers with layer_idx found")
    last = max(attention_modules, key=lambda m: m.layer_idx)
    recorder = AttentionRecorder()
    setattr(last, RECORDER_ATTRIBUTE, recorder)
    return recorder
