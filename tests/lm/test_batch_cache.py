"""The left-padded batch cache: joins pad, leaves select and trim, rows copy out exactly."""

import torch
from transformers import DynamicCache

from dynrag.lm.batch_cache import BatchCache


def one_row(n: int, fill: float, layers: int = 2) -> DynamicCache:
    cache = DynamicCache()
    for i in range(layers):
        keys = torch.arange(n, dtype=torch.float32).reshape(1, 1, n, 1).expand(1, 2, n, 3) + fill
        cache.update(keys.clone(), -keys.clone(), i)
    return cache


def test_rows_of_different_lengths_are_left_padded_and_masked():
    batch = BatchCache()
    batch.add([one_row(3, 100.0), one_row(5, 200.0)])
    assert batch.lengths == [3, 5] and batch.width == 5 and batch.cached_tokens == 10
    assert batch.mask().tolist() == [[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]]
    assert batch.mask(extra=1).tolist() == [[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]]
    keys = batch.cache.layers[0].keys
    assert keys[0, 0, :2].abs().sum() == 0  # padding
    assert keys[0, 0, 2:, 0].tolist() == [100.0, 101.0, 102.0]
    # A longer row joining pads the rows already there.
    batch.add([one_row(7, 300.0)])
    assert batch.lengths == [3, 5, 7] and batch.width == 7
    assert batch.mask()[0].tolist() == [0, 0, 0, 0, 1, 1, 1]


def test_leaving_rows_are_dropped_and_shared_padding_cut():
    batch = BatchCache()
    batch.add([one_row(2, 10.0), one_row(6, 20.0), one_row(4, 30.0)])
    batch.keep([0, 2])  # the longest row left: two columns of padding are shared by both
    assert batch.lengths == [2, 4] and batch.width == 4
    assert batch.cache.layers[1].keys[1, 0, :, 0].tolist() == [30.0, 31.0, 32.0, 33.0]
    assert batch.mask().tolist() == [[0, 0, 1, 1], [1, 1, 1, 1]]
    batch.keep([])
    assert len(batch) == 0 and batch.width == 0


def test_a_row_copies_out_its_real_tokens_only():
    batch = BatchCache()
    batch.add([one_row(2, 10.0), one_row(5, 20.0)])
    row = batch.row(0)
    assert row.get_seq_length() == 2
    assert row.layers[0].keys[0, 0, :, 0].tolist() == [10.0, 11.0]
    assert row.layers[0].values[0, 0, :, 0].tolist() == [-10.0, -11.0]
    row.layers[0].keys += 1  # a copy: the batch is untouched
    assert batch.cache.layers[0].keys[0, 0, 3, 0] == 10.0


def test_a_step_grows_every_row():
    batch = BatchCache()
    batch.add([one_row(2, 0.0), one_row(3, 0.0)])
    for i, layer in enumerate(batch.cache.layers):
        layer.update(torch.zeros(2, 2, 1, 3), torch.zeros(2, 2, 1, 3))
    batch.grew()
    assert batch.lengths == [3, 4] and batch.width == 4
    assert batch.mask().tolist() == [[0, 1, 1, 1], [1, 1, 1, 1]]
