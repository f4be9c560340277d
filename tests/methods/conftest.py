"""Fixtures the fast method tests share: a tiny random Llama that writes words, a real BM25 index."""

import pytest
import torch

from dynrag.corpus.passage import Passage
from dynrag.lm.hf import HFLanguageModel
from dynrag.retrieval.bm25 import BM25Index
from tests.tiny_models import tiny_llama, tiny_tokenizer

PASSAGES = [
    "the old bridge of the town was built in 1887 by an engineer",
    "the river rhone flows south through lyon",
    "the museum of the harbour town opened in the new year",
    "the founder of the school was born in paris",
]


def without_unk(model):
    # The prompt's exemplars are mostly out of the tiny vocabulary; keep the random model from
    # copying <unk>, so it writes words that can trigger and form queries.
    model.lm_head.register_forward_hook(lambda module, args, out: out.index_fill(-1, torch.tensor([0]), -1e4))
    return model


@pytest.fixture(scope="module")
def lm():
    tok = tiny_tokenizer()
    return HFLanguageModel(without_unk(tiny_llama(len(tok), seed=5)), tok, name="tiny")


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    out = tmp_path_factory.mktemp("idx") / "index"
    BM25Index.build([Passage(f"p{i}", f"title {i}", t) for i, t in enumerate(PASSAGES)], out, progress=False)
    return BM25Index.load(out, backend="numpy")  # numba's JIT would cost seconds per test run
