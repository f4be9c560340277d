"""``DaskCluster``: answer questions as tasks on a Dask cluster (``dynrag eval --dask tcp://HOST:8786``).

One task per question, so the scheduler balances questions of uneven length over the workers.
Each worker process builds the run's method once (``worker.worker_method``: the model loads
on its first question and stays for the rest) and returns the outcome; only the coordinator writes
predictions.jsonl. When a worker dies, the scheduler runs its questions again on another worker;
a question that has been on ``distributed.scheduler.allowed-failures`` (default 3) dying workers
stops the run with an error naming it.

Workers need what the run needs: dynrag and the model installed, and the index at the same path
(a shared filesystem), unless the retriever is a search server (``--retriever opensearch``). One
question runs at a time per worker process; start workers with ``--nthreads 1`` (more threads only
wait on the model) and as many processes per machine as it has cores (``--nworkers``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from dynrag.errors import DynragError
from dynrag.eval.worker import Outcome, Question, WorkerJob, answer_in_worker

CONNECT_TIMEOUT_S = 10.0


@dataclass
class DaskCluster:
    job: WorkerJob
    address: str
    connect_timeout: float = CONNECT_TIMEOUT_S
    description: str = field(init=False)

    def __post_init__(self) -> None:
        self.description = f"Dask cluster at {self.address}"

    def answers(self, questions: Sequence[Question]) -> Iterator[Outcome]:
        try:
            from distributed import Client, as_completed
            from distributed.scheduler import KilledWorker
        except ImportError as exc:  # pragma: no cover - distributed is a dependency
            raise DynragError("--dask needs dask.distributed: pip install 'dask[distributed]'") from exc
        try:
            client = Client(self.address, timeout=self.connect_timeout, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise DynragError(f"--dask {self.address}: cannot reach the Dask scheduler ({reason})") from None
        futures = {}
        try:
            for qid, question in questions:
                future = client.submit(answer_in_worker, self.job, qid, question, pure=False)
                futures[future] = qid
            for future in as_completed(list(futures), loop=client.loop):
                qid = futures.pop(future)
                try:
                    yield future.result()
                except KilledWorker as exc:
                    raise DynragError(
                        f"question {qid!r}: the Dask workers running it died too often ({exc}); stopping "
                        "(finished answers are saved: fix the cause and run the command again)"
                    ) from None
        finally:
            if futures:
                client.cancel(list(futures))
            client.close()
