"""Stopping a run on SIGTERM or SIGINT: the signal is noted, the step in progress finishes, a checkpoint is written,
and the process exits with 128 + the signal number."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stopped(SystemExit):
    """Training stopped on SIGTERM or SIGINT once its checkpoint was written; exits with 128 + the signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


class StopRequest:
    """SIGTERM or SIGINT while training: noted here, acted on after the step in progress (_Run._stop_if_asked).

    A second signal gives up waiting (for a step that hangs): the previous handlers come back and get it, so SIGINT
    raises KeyboardInterrupt and SIGTERM ends the process, both without a checkpoint.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self.previous: dict[int, Any] = {}

    @contextlib.contextmanager
    def caught(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # only the main thread may set handlers: a run in another thread leaves the process's alone
            return
        self.previous = {s: signal.signal(s, self._note) for s in STOP_SIGNALS}
        try:
            yield
        finally:
            self._restore()

    def _note(self, signum: int, frame: Any) -> None:
        if self.signum is None:
            self.signum = signum
            return
        self._restore()
        signal.raise_signal(signum)

    def _restore(self) -> None:
        for s, handler in self.previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)  # None: a handler set outside Python
        self.previous = {}
