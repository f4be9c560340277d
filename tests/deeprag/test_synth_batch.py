"""`synth --batch N`: questions searched at once over one batching model give the records one at
a time gives, each written once."""

import pytest

from dynrag.deeprag.synth import Models, run_synth
from dynrag.io.jsonl import read_jsonl
from tests.deeprag.test_synth import bench, request  # noqa: F401 - the fixture
from tests.tiny_models import tiny_llama_lm


def without_timings(records):
    return sorted(({k: v for k, v in r.items() if k != "seconds"} for r in records), key=lambda r: r["id"])


@pytest.mark.slow  # over a second of CPU: `make test` runs it, `make test-fast` does not
def test_batched_synthesis_writes_the_records_of_one_at_a_time(tmp_path, bench):  # noqa: F811
    data, index = bench
    alone = run_synth(request(tmp_path / "a", data, max_steps=2, limit=4), progress=False,
                      models=Models(tiny_llama_lm(seed=3), None, index))
    batched = run_synth(request(tmp_path / "b", data, max_steps=2, limit=4, batch=3), progress=False,
                        models=Models(tiny_llama_lm(seed=3), None, index))
    assert batched["questions"] == alone["questions"] == 4
    for name in ("trajectories.jsonl", "skipped.jsonl"):
        a = read_jsonl(tmp_path / "a" / "synth" / name)
        b = read_jsonl(tmp_path / "b" / "synth" / name)
        assert without_timings(b) == without_timings(a)
        assert len({r["id"] for r in b}) == len(b)
