"""How this project's jobs take SIGINT (Ctrl-C) and SIGTERM (a scheduler's stop), in one place: a command raises
them as exceptions and cleans up (``interruptible``), a training run stops between steps (``stop_between_steps``),
renames that must land together hold them back (``held``). Python sets signal handlers only in the main thread;
elsewhere each of these leaves the block to run as it would."""

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import CodeType, FrameType

Handler = Callable[[int, FrameType | None], None]


@contextmanager
def _handled_by(handle: Handler) -> Iterator[None]:
    """``handle`` takes SIGINT and SIGTERM inside the block; the handlers before are back after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, handle) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)  # None: set outside Python


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt, so one ``except`` cleans up after both."""


def exit_status(interrupt: KeyboardInterrupt) -> int:
    """The shell's convention for a process ended by a signal: 128 + its number (130 SIGINT, 143 SIGTERM)."""
    return 128 + (signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT)


_REDELIVERY_DELAY_S = 0.005  # after the callback that dropped the interrupt has returned


def _runs(frame: FrameType | None, code: CodeType) -> bool:
    """Whether ``code`` is running in ``frame`` or in a frame that called it."""
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


@contextmanager
def interruptible() -> Iterator[None]:
    """Inside the block SIGINT raises KeyboardInterrupt and SIGTERM raises ``Terminated``, once: a second
    signal while the first is being cleaned up (files closed, progress recorded) is ignored, so the
    cleanup finishes.

    Python runs a handler between any two bytecodes, also inside a weakref callback or a ``__del__``, where an
    exception is reported as "ignored" (``sys.unraisablehook``) and dropped: the run went on to its end and exited
    0. Such a dropped interrupt is sent again a moment later, from a timer thread, to land in the block's code."""
    if threading.current_thread() is not threading.main_thread():  # no handlers there: leave the hook alone too
        yield
        return
    raised = False

    def send_again(signum: int) -> None:
        timer = threading.Timer(_REDELIVERY_DELAY_S, os.kill, (os.getpid(), signum))
        timer.daemon = True  # never keeps the process alive
        timer.start()

    def handle(signum: int, frame: FrameType | None) -> None:
        nonlocal raised
        if raised:
            return
        if _runs(frame, redeliver_dropped.__code__):  # raised here, it would be dropped again
            send_again(signum)
            return
        raised = True
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    previous_hook = sys.unraisablehook

    def redeliver_dropped(unraisable: "sys.UnraisableHookArgs") -> None:
        nonlocal raised
        if raised and isinstance(unraisable.exc_value, KeyboardInterrupt):
            raised = False
            send_again(signal.SIGTERM if isinstance(unraisable.exc_value, Terminated) else signal.SIGINT)
            return
        previous_hook(unraisable)

    with _handled_by(handle):
        sys.unraisablehook = redeliver_dropped
        try:
            yield
        finally:
            sys.unraisablehook = previous_hook


@dataclass
class StopRequest:
    """The signal that asked a training run to stop, once one has."""

    signal_number: int | None = None


@contextmanager
def stop_between_steps() -> Iterator[StopRequest]:
    """The first SIGINT or SIGTERM sets the request's ``signal_number`` for the loop to stop after its current step
    (and a checkpoint); a second ends the process at once (checkpoints are written atomically, so that loses only
    the work since the last one)."""
    request = StopRequest()

    def handle(number: int, frame: FrameType | None) -> None:
        if request.signal_number is not None:
            signal.signal(number, signal.SIG_DFL)
            os.kill(os.getpid(), number)
            return
        request.signal_number = number

    with _handled_by(handle):
        yield request


@contextmanager
def held() -> Iterator[None]:
    """Ctrl-C or SIGTERM waits for the block (renames that must land together, microseconds) to end, then reaches
    the handler it would have reached. Held by Python handlers, not a thread's signal mask, which a signal
    delivered to another thread of the process passes by."""
    received: list[int] = []
    try:
        with _handled_by(lambda number, frame: received.append(number)):
            yield
    finally:
        for number in received:
            signal.raise_signal(number)
