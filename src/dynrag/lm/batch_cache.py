"""The key/value cache of a batch of rows of different lengths, left-padded to one width.

Row b's real tokens are the last ``lengths[b]`` columns of every layer; the columns before them
are padding that the attention mask hides. Rows join (their own one-row cache, prefilled alone,
is padded to the batch's width or the batch to theirs) and leave (the rest are selected and the
padding every remaining row shares is cut away) between decode steps. A decode step appends one
column to every row, so every length grows by one.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


def _pad_left(tensor: torch.Tensor, width: int) -> torch.Tensor:
    pad = width - tensor.shape[2]
    if pad == 0:
        return tensor
    zeros = tensor.new_zeros((tensor.shape[0], tensor.shape[1], pad, tensor.shape[3]))
    return torch.cat([zeros, tensor], dim=2)


class BatchCache:
    def __init__(self) -> None:
        self.cache: DynamicCache | None = None
        self.lengths: list[int] = []

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def width(self) -> int:
        return self.cache.get_seq_length() if self.cache is not None else 0

    @property
    def cached_tokens(self) -> int:
        """Positions held, padding included: what the batch's memory grows with."""
        return self.width * len(self.lengths)

    def mask(self, extra: int = 0) -> torch.Tensor:
        """(rows, width + extra) attention mask: 1 on each row's real columns (and the ``extra``
        columns a step is about to append), 0 on padding."""
        width = self.width + extra
        device = self._device()
        columns = torch.arange(width, device=device)[None, :]
        starts = torch.tensor([self.width - n for n in self.lengths], device=device)[:, None]
        return (columns >= starts).long()

    def _device(self) -> torch.device:
        for layer in self.cache.layers if self.cache is not None else ():
            if layer.is_initialized:
                return layer.keys.device
        return torch.device("cpu")

    def add(self, caches: list[DynamicCache]) -> None:
        """Append rows, each given as a one-row cache holding only that row's tokens."""
        if not caches:
            return
        lengths = [c.get_seq_length() for c in caches]
        width = max([self.width, *lengths])
        parts = ([self.cache] if self.cache is not None else []) + list(caches)
        merged = DynamicCache()
        merged.layers = []
        for i in range(len(parts[0].layers)):
            layer = DynamicLayer()
            keys = torch.cat([_pad_left(p.layers[i].keys, width) for p in parts], dim=0)
            values = torch.cat([_pad_left(p.layers[i].values, width) for p in parts], dim=0)
            layer.update(keys, values)
            merged.layers.append(layer)
        self.cache = merged
        self.lengths.extend(lengths)

    def grew(self) -> None:
        """A decode step appended one column (a real token) to every row."""
        self.lengths = [n + 1 for n in self.lengths]

    def keep(self, rows: list[int]) -> None:
        """Keep only ``rows`` (indices, in the order given) and cut the padding they all share."""
        if rows == list(range(len(self.lengths))):
            return
        if not rows:
            self.cache, self.lengths = None, []
            return
        lengths = [self.lengths[r] for r in rows]
        start = self.width - max(lengths)
        for layer in self.cache.layers:
            # Per layer: with device_map=auto the layers of one model live on different devices.
            index = torch.tensor(rows, device=layer.keys.device)
            layer.keys = layer.keys.index_select(0, index)[:, :, start:, :].contiguous()
            layer.values = layer.values.index_select(0, index)[:, :, start:, :].contiguous()
        self.lengths = lengths

    def row(self, b: int) -> DynamicCache:
        """A one-row copy of row ``b``'s real tokens (for the model's reuse of recent caches)."""
        start = self.width - self.lengths[b]
        out = DynamicCache()
        out.layers = []
        for layer in self.cache.layers:
            fresh = DynamicLayer()
            fresh.update(layer.keys[b : b + 1, :, start:, :].clone(), layer.values[b : b + 1, :, start:, :].clone())
            out.layers.append(fresh)
        return out
