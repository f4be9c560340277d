"""`synth --batch N`: questions searched at once over one batching model give the records one at
a time gives, each written once."""

import threading
import time

from dynrag.deeprag.synth import Models, in_flight, run_synth
from dynrag.io.jsonl import read_jsonl
from tests.deeprag.test_synth import bench, request  # noqa: F401 - the fixture
from tests.tiny_models import tiny_llama_lm


def test_in_flight_yields_every_item_once_with_at_most_n_running():
    running, peak, lock = [0], [0], threading.Lock()

    def work(i):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.01 * (i % 3))
        with lock:
            running[0] -= 1
        return i * 10

    got = list(in_flight(work, list(range(11)), 3))
    assert sorted(got) == [i * 10 for i in range(11)]
    assert peak[0] <= 3
    assert list(in_flight(work, [1, 2, 3], 1)) == [10, 20, 30]  # one at a time: in order


def without_timings(records):
    return sorted(({k: v for k, v in r.items() if k != "seconds"} for r in records), key=lambda r: r["id"])


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
