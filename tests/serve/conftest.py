"""`dynrag serve` started for real (uvicorn on a free loopback port) over the bundled model and
the demo index, once per session, with a bearer key and small limits the tests can reach."""

from __future__ import annotations

import pytest

from dynrag.demo import ordered_demo_questions
from tests.servers import artifacts_dir, dynrag_serve, free_port

API_KEY = "test-key-6f1e"
LIMITS = {"max_body_bytes": 8192, "max_question_chars": 400, "max_tokens": 128, "queue_size": 4}


class Served:
    def __init__(self, port: int, key: str | None):
        self.port, self.key = port, key
        self.root = f"http://127.0.0.1:{port}"
        self.v1 = f"{self.root}/v1"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}


@pytest.fixture(scope="session")
def served():
    port = free_port()
    # The tiny model: these tests check the server, not how well its model reads.
    args = ["--api-key", API_KEY, "--model", "bundled:smollm2"] + [f"--{k.replace('_', '-')}={v}" for k, v in LIMITS.items()]
    with dynrag_serve(port, artifacts_dir() / "serve-main.log", *args):
        yield Served(port, API_KEY)


@pytest.fixture(scope="session")
def demo_question():
    return ordered_demo_questions()[0]
