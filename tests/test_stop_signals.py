"""``elmo.stop_signals``: a Ctrl-C or SIGTERM during a command's work stops it, also when Python runs the signal's
handler inside a weakref callback, where the exception it raises is dropped; a training run's first signal asks it to
stop and a second ends it; held signals arrive after the block; the handlers before are back after each."""

import gc
import os
import signal
import subprocess
import sys
import threading
import time
import weakref

import pytest

from elmo.stop_signals import Terminated, held, interruptible, stop_between_steps


class _Thing:
    pass


def _busy(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:  # bytecodes between which Python runs a pending handler
        pass


@pytest.mark.parametrize(("signum", "expected"), [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, Terminated)])
def test_an_interrupt_whose_handler_ran_inside_a_weakref_callback_still_stops_the_block(signum, expected):
    delivered_in_callback = []

    def callback(_ref: object) -> None:
        delivered_in_callback.append(True)
        os.kill(os.getpid(), signum)
        _busy(0.5)  # the handler runs in here; what it raises leaves the callback and is dropped

    finished = False
    with pytest.raises(expected), interruptible():
        thing = _Thing()
        ref = weakref.ref(thing, callback)
        del thing
        gc.collect()
        _busy(5.0)  # the interrupt sent again lands here
        finished = True
    assert delivered_in_callback and not finished
    assert ref() is None


def test_the_previous_unraisable_hook_is_back_after_the_block():
    import sys

    before = sys.unraisablehook
    with interruptible():
        assert sys.unraisablehook is not before
    assert sys.unraisablehook is before


def test_a_training_runs_first_signal_is_recorded_and_the_handlers_before_are_back_after():
    before = signal.getsignal(signal.SIGTERM)
    with stop_between_steps() as request:
        assert request.signal_number is None
        os.kill(os.getpid(), signal.SIGTERM)
        _busy(0.2)
        assert request.signal_number == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_second_signal_ends_the_training_process_at_once():
    script = (
        "import os, signal, time\n"
        "from elmo.stop_signals import stop_between_steps\n"
        "with stop_between_steps() as request:\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(0.2)\n"
        "    print(request.signal_number, flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(5)\n"
        "print('went on')\n"
    )
    finished = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert finished.stdout.split() == [str(int(signal.SIGINT))]
    assert finished.returncode == -signal.SIGINT


def test_a_held_signal_reaches_the_handler_before_only_after_the_block():
    reached: list[str] = []
    previous = signal.signal(signal.SIGTERM, lambda number, frame: reached.append("handler"))
    try:
        with held():
            os.kill(os.getpid(), signal.SIGTERM)
            _busy(0.2)
            reached.append("block ended")
        _busy(0.1)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert reached == ["block ended", "handler"]


def test_outside_the_main_thread_no_handler_is_set():
    seen = []

    def run() -> None:
        with stop_between_steps(), held(), interruptible():
            seen.extend([signal.getsignal(signal.SIGINT), sys.unraisablehook])

    before = [signal.getsignal(signal.SIGINT), sys.unraisablehook]
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == before
