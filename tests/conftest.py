"""Fixtures every test package shares, and one setting: torch runs on one thread in tests.

The models here are tiny (random test models) or small (the bundled 135M one on a few tokens):
a second thread saves little, and on a shared machine its spin-waiting costs several times the
work itself (measured: tests/methods/test_iterative_methods.py, 7 s of CPU on one thread against
43 s on two under load). Set before anything imports torch; subprocesses inherit it.
"""

from __future__ import annotations

import gc
import os
import sys

# Off until collection ends (pytest_collection below): importing the test modules' libraries.
gc.disable()
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
if "torch" in sys.modules:  # already imported by a plugin: the variable came too late
    sys.modules["torch"].set_num_threads(1)

import pytest  # noqa: E402

pytest_plugins = ["tests.cpu_budget"]

from dynrag.retrieval.embedder import Embedder  # noqa: E402


@pytest.hookimpl(wrapper=True)
def pytest_collection(session):
    """Collecting imports torch, transformers and the rest once, and the cyclic garbage collector
    ran about ten full passes over their millions of objects meanwhile, finding next to nothing
    (1.3-1.6 s of CPU, measured with gc.callbacks on tests/methods and tests/lm). It is off from
    this file's import to the end of collection; then what was imported is frozen (gc.freeze), so
    the full passes of the run skip it."""
    gc.disable()
    try:
        return (yield)
    finally:
        gc.freeze()
        gc.enable()


@pytest.fixture(scope="session", autouse=True)
def packaged_embedder_loaded_once():
    """Within the test process, ``Embedder.load()`` of the packaged model reads its weights once:
    the chain, the classifier, dense retrieval and the tests then share one real embedder, instead
    of each loading its own (a second or more each on two cores). A model directory still loads."""
    real = Embedder.load.__func__
    loaded: dict[str, Embedder] = {}

    def load(cls, path=None):
        if path:
            return real(cls, path)
        if "packaged" not in loaded:
            loaded["packaged"] = real(cls)
        return loaded["packaged"]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Embedder, "load", classmethod(load))
        yield


@pytest.fixture(scope="session")
def embedder():
    """The real packaged all-MiniLM-L6-v2 sentence embedder."""
    return Embedder.load()


@pytest.fixture(scope="session")
def opensearch_url():
    """A real OpenSearch-compatible server (osmem-server, a static binary from its PyPI wheel) on a
    free loopback port for the test session; it exits with the test process."""
    from osmem_server import OsmemServer

    server = OsmemServer.start(japanese=False, addr="127.0.0.1:0")
    assert server.url.startswith("http://127.0.0.1:")
    yield server.url
    server.close()
