"""Freed memory goes back to the system once the process has grown by the slack, and not before."""

import pytest

from elmo.memory import FreedMemoryTrimmer, resident_bytes

pytestmark = pytest.mark.skipif(FreedMemoryTrimmer()._trim is None or resident_bytes() is None,
                                reason="needs glibc and /proc")
MiB = 2**20


def fragment_the_heap(n_blocks: int) -> bytearray:
    """Allocate ``n_blocks`` of 100 KiB from the heap (below glibc's mmap threshold), free all but the last: the
    last one pins the top of the heap, so the freed space below it stays resident until a trim."""
    blocks = [bytearray(b"x" * (100 * 1024)) for _ in range(n_blocks)]
    last = blocks[-1]
    del blocks
    return last


def test_a_process_grown_past_the_slack_is_trimmed_back():
    trimmer = FreedMemoryTrimmer(slack_bytes=64 * MiB)
    trimmer.after_batch()  # the baseline
    pinned = fragment_the_heap(2000)  # 200 MiB touched, then freed
    grown = resident_bytes()
    trimmer.after_batch()
    assert trimmer.trims == 1
    assert resident_bytes() < grown - 100 * MiB
    del pinned


def test_growth_within_the_slack_is_left_alone():
    trimmer = FreedMemoryTrimmer(slack_bytes=4096 * MiB)
    trimmer.after_batch()
    pinned = fragment_the_heap(500)
    trimmer.after_batch()
    assert trimmer.trims == 0
    del pinned
