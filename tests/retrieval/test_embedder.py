"""The packaged sentence-embedding model loads offline and gives normalised, meaningful vectors."""

import numpy as np

from dynrag.retrieval.embedder import Embedder


def test_packaged_embedder_vectors():
    emb = Embedder.load()
    texts = ["The bridge crosses the river.", "A bridge spans the river.", "Bananas are yellow fruit."]
    vecs = emb.encode(texts, batch_size=2)
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2] + 0.2
    # Batching and length-sorting do not change the vectors.
    np.testing.assert_allclose(emb.encode(texts[::-1], batch_size=3)[::-1], vecs, atol=1e-5)
