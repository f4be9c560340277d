"""A LanguageModel wrapper that stops a running method when its request is cancelled.

The model runs in a worker thread; a timeout or a client that hangs up sets the job's event, and
the next generated token (or the next call into the model) raises `Cancelled`, which unwinds the
method. Everything else is passed through unchanged, so methods see the model they would see
without a server.
"""

from __future__ import annotations

import inspect
import threading
from typing import Any, Callable, Sequence


class Cancelled(Exception):
    """The request this work was for was cancelled (timeout or disconnect)."""


class CancellableLM:
    def __init__(self, lm: Any):
        self._lm = lm
        self.event: threading.Event | None = None  # the running job's; one job at a time

    @property
    def name(self) -> str:
        return self._lm.name

    @property
    def capabilities(self):
        return self._lm.capabilities

    def check(self) -> None:
        if self.event is not None and self.event.is_set():
            raise Cancelled()

    def generate(self, prompt, max_new_tokens: int, stop: Sequence[str] = (), capture_attention: bool = False,
                 stop_after: Sequence[str] = (), stop_when: Callable[[Any], bool] | None = None, **kwargs: Any):
        self.check()

        def watch(state: Any) -> bool:
            self.check()
            return bool(stop_when(state)) if stop_when is not None else False

        return self._lm.generate(prompt, max_new_tokens, stop=stop, capture_attention=capture_attention,
                                 stop_after=stop_after, stop_when=watch, **kwargs)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._lm, name)
        if inspect.ismethod(attr) and not name.startswith("_"):  # not e.g. a (callable) tokenizer
            def checked(*args: Any, **kwargs: Any) -> Any:
                self.check()
                return attr(*args, **kwargs)
            return checked
        return attr
