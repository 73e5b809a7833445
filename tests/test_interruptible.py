"""``elmo.command_line.interruptible``: a Ctrl-C or SIGTERM during a command's work stops it, also when Python runs
the signal's handler inside a weakref callback, where the exception it raises is dropped."""

import gc
import os
import signal
import time
import weakref

import pytest

from elmo.command_line import Terminated, interruptible


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
