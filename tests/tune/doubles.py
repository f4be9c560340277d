"""A method double whose EM depends on its options, so a tune has something to find."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.fakes import FakeMethod


@dataclass(frozen=True)
class PeakedFake:
    """A picklable method factory: a FakeMethod that answers the first ``share`` of ``golds``
    (question -> gold answer, in order) right, ``share`` falling off linearly from 1 as option
    ``option`` moves away from ``peak``; ``log``/``hold_first`` as FakeMethodFactory's."""

    golds: tuple[tuple[str, str], ...]
    option: str = "theta"
    peak: float = 1.0
    log: str | None = None
    hold_first: str | None = None
    hold_at: float | None = None  # with hold_first and held: hold that question only at this option value
    held: str | None = None  # a file made when the question is held: it is held once, ever
    gate: str | None = None  # every question waits until this file exists

    def __call__(self, config: dict[str, Any], retriever):
        value = config["options"].get(self.option)
        value = self.peak if value is None else float(value)
        if self.held is not None or self.gate is not None:
            return _Wrapped(self, value, retriever)
        share = max(0.0, 1.0 - abs(value - self.peak))
        # the right ones spread evenly over the questions, so a running EM shows the share early
        answers = {q: (a if int((i + 1) * share + 1e-9) > int(i * share + 1e-9) else "wrong")
                   for i, (q, a) in enumerate(self.golds)}
        return FakeMethod(retriever, answers, log=self.log, hold_first=self.hold_first)


class _Wrapped:
    """The method of a PeakedFake with ``held`` (the question ``hold_first`` at value ``hold_at``
    stays in flight until the process is killed, the first time only) or ``gate``."""

    def __init__(self, factory: PeakedFake, value: float, retriever):
        from dataclasses import replace

        self.inner = replace(factory, held=None, gate=None, hold_first=None, log=None)(
            dict(options={factory.option: value}), retriever)
        self.factory, self.value = factory, value

    def answer(self, question: str):
        import os
        import time

        from tests.waiting import HANG_GUARD_S

        f = self.factory
        if f.log:  # before any wait: the log says the question is in flight
            with open(f.log, "a", encoding="utf-8") as log:
                log.write(f"{os.getpid()}\t{question}\n")
        if f.gate is not None:
            from tests.waiting import wait_for

            wait_for(lambda: os.path.exists(f.gate), f"the gate {f.gate}", poll_s=0.01)
        if f.held is not None and question == f.hold_first and self.value == f.hold_at and not os.path.exists(f.held):
            open(f.held, "w").close()
            time.sleep(HANG_GUARD_S)
        return self.inner.answer(question)


def peaked(rows: list[dict], **kw) -> PeakedFake:
    return PeakedFake(tuple((r["question"], r["answers"][0]) for r in rows), **kw)


@dataclass(frozen=True)
class InterruptOnce:
    """A method factory like PeakedFake whose method raises KeyboardInterrupt (Ctrl-C) the first
    time it is asked ``question`` (``flag`` marks that it was)."""

    inner: PeakedFake
    question: str
    flag: str

    def __call__(self, config: dict[str, Any], retriever):
        import os

        method = self.inner(config, retriever)
        real = method.answer

        def answer(question: str):
            if question == self.question and not os.path.exists(self.flag):
                open(self.flag, "w").close()
                raise KeyboardInterrupt
            return real(question)

        method.answer = answer
        return method
