"""How a training run takes SIGINT and SIGTERM: it stops between steps, after a checkpoint, not mid-step."""

import os
import signal
import threading
from typing import Any

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    """SIGINT and SIGTERM while the loop runs: the first sets ``signal_number`` for the loop to stop after
    its current step; a second ends the process at once (checkpoints are written atomically, so that loses
    only the work since the last one). Only the main thread can take signals; elsewhere this does nothing."""

    def __init__(self) -> None:
        self.signal_number: int | None = None
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            self.previous = {number: signal.signal(number, self._handle) for number in _STOP_SIGNALS}
        return self

    def __exit__(self, *exc_info: object) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)  # None: set outside Python

    def _handle(self, number: int, frame: object) -> None:
        if self.signal_number is not None:
            signal.signal(number, signal.SIG_DFL)
            os.kill(os.getpid(), number)
            return
        self.signal_number = number
