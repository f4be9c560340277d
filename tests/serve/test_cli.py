"""`dynrag serve`'s command line fails on bad settings before it loads anything (in-process: see
tests/cli_inprocess.py; a server that would start instead fails the test rather than blocking it)."""

import pytest

from tests.cli_inprocess import run_in_process


@pytest.fixture(autouse=True)
def no_server(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the server would have started")

    monkeypatch.setattr("dynrag.serve.cli.run_server", refuse)


def serve(*args):
    return run_in_process("serve", *args)


def test_a_bad_config_key_or_setting_is_named(tmp_path):
    bad = tmp_path / "run.yaml"
    bad.write_text("method: flare\noptions:\n  thetta: 0.3\n")
    r = serve("--config", str(bad))
    assert r.returncode == 1 and "thetta" in r.stderr and "theta" in r.stderr
    r = serve("--queue-size", "-1")
    assert r.returncode == 1 and "queue_size" in r.stderr


def test_batch_for_a_model_behind_an_http_server_is_refused_naming_why():
    r = serve("--batch", "3", "--model", "openai:http://127.0.0.1:9/v1#some-model", "--retriever", "bm25")
    assert r.returncode == 1 and "--batch 3" in r.stderr and "HTTP server" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = serve("--batch", "0")
    assert r.returncode == 1 and "batch" in r.stderr
