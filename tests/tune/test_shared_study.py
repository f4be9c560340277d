"""Two `dynrag tune` processes on one study in a real PostgreSQL server: disjoint trials, none lost
or doubled, exactly --trials of them."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.eval import fixtures as fx
from tests.waiting import HANG_GUARD_S, wait_for
from tests.tune.postgres import postgres_server

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
sys.path.insert(0, {repo!r})
sys.path.insert(0, {src!r})
from dynrag.eval import runner
from tests.eval import fixtures as fx
from tests.tune.doubles import peaked
runner.default_method_factory = peaked(fx.qa_rows({n}), log={log!r}, gate={gate!r})
from dynrag.cli import app
sys.argv = ["dynrag", *sys.argv[1:]]
app()
"""


@pytest.fixture(scope="module")
def postgres_url():
    with postgres_server() as url:
        yield url


# Two `dynrag tune` processes against a real PostgreSQL: outside `make test-fast`.
@pytest.mark.slow
def test_two_processes_share_one_study_without_losing_or_doubling_a_trial(tmp_path, postgres_url):
    import optuna

    rows = fx.qa_rows(4)
    data = fx.write_jsonl(tmp_path / "dev.jsonl", rows)
    log, gate = tmp_path / "asked.log", tmp_path / "gate"
    script = tmp_path / "tune.py"
    script.write_text(SCRIPT.format(repo=str(REPO), src=str(REPO / "src"), n=4, log=str(log), gate=str(gate)))

    def start(name):
        command = [sys.executable, str(script), "tune", "--dataset", "jsonl", "--data", str(data), "--corpus",
                   "contexts", "--method", "dragin", "--workers", "1", "--out", str(tmp_path / name),
                   "--space", "theta=0.3:2.0", "--trials", "6", "--storage", postgres_url, "--study", "shared"]
        return subprocess.Popen(command, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def askers():
        return {line.split("\t")[0] for line in log.read_text().splitlines()} if log.exists() else set()

    # The first process creates the study's tables; then both hold a trial in flight at once.
    first = start("a")
    wait_for(lambda: len(askers()) == 1 or first.poll() is not None, "the first process asking a question")
    second = start("b")
    wait_for(lambda: len(askers()) == 2 or second.poll() is not None, "both processes in a trial at once")
    gate.touch()
    results = [p.communicate(timeout=HANG_GUARD_S) for p in (first, second)]
    for proc, (_, err) in zip((first, second), results):
        assert proc.returncode == 0, err

    study = optuna.load_study(study_name="shared", storage=postgres_url.replace("postgresql:", "postgresql+psycopg:"))
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    others = [t for t in study.trials if t.state.name != "COMPLETE"]
    assert len(complete) == 6
    # a trial another process asked for after the sixth was taken is failed unrun, and says so
    assert all(t.state.name == "FAIL" and t.user_attrs.get("skipped") for t in others)
    dirs = {name: {p.name for p in (tmp_path / name / "trials").iterdir()} for name in ("a", "b")}
    assert dirs["a"] and dirs["b"] and not dirs["a"] & dirs["b"]
    assert dirs["a"] | dirs["b"] == {str(t.number) for t in complete}
    ran = [{line.split(":")[0] for line in err.splitlines() if line.startswith("trial ") and " -> " in line}
           for _, err in results]
    assert not ran[0] & ran[1] and len(ran[0] | ran[1]) == 6
