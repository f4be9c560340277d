"""A LanguageModel wrapper that stops a running method when its request is cancelled.

Methods run on worker threads, one request per thread, several at once when the server batches.
Each worker sets its job's event on this wrapper before it runs the method; the event is kept per
thread, so one request's cancel never touches another's. A timeout or a client that hangs up sets
the job's event, and the next generated token (or the next call into the model) raises
`Cancelled`, which unwinds that method only. The event is captured when ``generate`` is called,
because behind a batching engine the per-token callback runs on the engine's thread, not the
request's. Everything else is passed through unchanged, so methods see the model they would see
without a server.
"""

from __future__ import annotations

import inspect
import threading
from typing import Any, Callable, Sequence


class Cancelled(Exception):
    """The request this work was for was cancelled (timeout or disconnect)."""


def _raise_if_set(event: threading.Event | None) -> None:
    if event is not None and event.is_set():
        raise Cancelled()


class CancellableLM:
    def __init__(self, lm: Any):
        self._lm = lm
        self._local = threading.local()

    @property
    def event(self) -> threading.Event | None:
        """The cancel event of the job running on the calling thread (None: not cancellable)."""
        return getattr(self._local, "event", None)

    @event.setter
    def event(self, value: threading.Event | None) -> None:
        self._local.event = value

    @property
    def name(self) -> str:
        return self._lm.name

    @property
    def capabilities(self):
        return self._lm.capabilities

    def check(self) -> None:
        _raise_if_set(self.event)

    def generate(self, prompt, max_new_tokens: int, stop: Sequence[str] = (), capture_attention: bool = False,
                 stop_after: Sequence[str] = (), stop_when: Callable[[Any], bool] | None = None, **kwargs: Any):
        event = self.event  # this request's: the callback below may run on another thread
        _raise_if_set(event)

        def watch(state: Any) -> bool:
            _raise_if_set(event)
            return bool(stop_when(state)) if stop_when is not None else False

        return self._lm.generate(prompt, max_new_tokens, stop=stop, capture_attention=capture_attention,
                                 stop_after=stop_after, stop_when=watch, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name in ("_lm", "_local"):  # asked before __init__ set them (a copy): no recursion
            raise AttributeError(name)
        attr = getattr(self._lm, name)
        if inspect.ismethod(attr) and not name.startswith("_"):  # not e.g. a (callable) tokenizer
            def checked(*args: Any, **kwargs: Any) -> Any:
                self.check()
                return attr(*args, **kwargs)
            return checked
        return attr
