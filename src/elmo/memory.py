"""Giving memory that PyTorch has freed back to the system, so a long stream of batches does not pile it up.

Each batch allocates tensors of new sizes. Once glibc's mmap threshold has risen (it does after the first large
frees), it serves large tensors from its heap. The freed pieces then end up too fragmented for it to return to
the system. So the RSS of a long embedding run crept up with the number of sentences, though nothing stayed
referenced: 691 MiB after 4,000 sentences, 931 MiB after 16,000 (small preset, the same 500 sentences
repeated). glibc's ``malloc_trim`` returns them. Run after every batch, it held the run at 684 MiB but cost
10 % of the small model's speed, because the next batch must fault the pages in again. So the trim runs only
when the RSS has grown by ``slack_bytes`` since the batch after the last trim (the one that brought the working
set back in). On a C library other than glibc nothing is done.

A training step allocates the same sizes every step, and glibc's own trimming got in its way: ``free`` hands the
top of the heap back to the system once it passes a threshold, and the next step faults those pages in again.
``keep_freed_memory`` stops that for a process that takes over the decision (``elmo train``): the trimmer alone
then returns memory. Tiny preset, 128 rows, one thread, 40 steps: about 115,000 page faults a step before, 8,000
after (docs/training.md, "Training speed").

Blocks above 32 MiB (a step's gates and activations at 512 rows) glibc maps on their own whatever the threshold,
and unmaps when freed, so each step faulted them in again: ``large_blocks_from_heap`` serves them from the heap
for the span of a training step. Only for that span: turned off for a whole run, validation's large blocks (its
full softmax's logits, now computed in blocks below the threshold) piled up in the heap until the kernel killed the
process (docs/training.md).
"""

import ctypes
import ctypes.util
import functools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

DEFAULT_SLACK_BYTES = 64 * 2**20
TRAINING_SLACK_SHARE = 0.5  # elmo train's trimmer: a step's freed heap kept up to half its working set
# mallopt's parameters (glibc's malloc.h) and the largest mmap threshold it takes on a 64-bit system.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_MMAP_MAX = -1, -3, -4
_LARGEST_MMAP_THRESHOLD = 32 * 2**20
_DEFAULT_MMAP_MAX = 65536  # glibc's DEFAULT_MMAP_MAX: how many blocks it may map at once
_MMAP_MAX_TUNABLE, _MMAP_MAX_VARIABLE = "glibc.malloc.mmap_max", "MALLOC_MMAP_MAX_"


@functools.cache
def _glibc_function(name: str) -> Callable[..., int] | None:
    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), name)
    except (OSError, AttributeError):  # not glibc
        return None


def _malloc_trim() -> Callable[[int], int] | None:  # int malloc_trim(size_t pad)
    return _glibc_function("malloc_trim")


def keep_freed_memory() -> bool:
    """Stops glibc from returning freed memory to the system on its own, for the rest of this process; whether it
    could. Use with a ``FreedMemoryTrimmer``, which then bounds the RSS.

    Setting a threshold stops glibc's adjusting of both, so the mmap threshold is fixed too, at its largest: tensors
    up to 32 MiB come from the heap, as they did once glibc's own adjusting had raised it.
    """
    mallopt = _glibc_function("mallopt")  # int mallopt(int param, int value)
    if mallopt is None:
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, _LARGEST_MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))


@functools.cache
def _starting_mmap_max() -> int:
    """``M_MMAP_MAX`` as glibc set it at the process's start, which it has no call to read back: a user's
    ``GLIBC_TUNABLES=glibc.malloc.mmap_max=N`` (the last one given; it wins over the older ``MALLOC_MMAP_MAX_=N``, as
    in glibc), else glibc's default. A value that is not a decimal or 0x-hexadecimal number counts as unset. Read
    from ``os.environ``, Python's copy of the environment, which glibc left whole (in ``/proc/self/environ`` it cuts
    the variable up at each ``:``)."""
    tunables = [value for name, _, value in (item.partition("=") for item in
                                             os.environ.get("GLIBC_TUNABLES", "").split(":"))
                if name == _MMAP_MAX_TUNABLE]
    value = tunables[-1] if tunables else os.environ.get(_MMAP_MAX_VARIABLE)
    try:
        return _DEFAULT_MMAP_MAX if value is None else int(value, 0)
    except ValueError:
        return _DEFAULT_MMAP_MAX


@contextmanager
def large_blocks_from_heap() -> Iterator[None]:
    """Within the block, glibc maps no block on its own (``M_MMAP_MAX`` 0): one of any size comes from the heap, and
    after ``keep_freed_memory`` the next step's block of that size reuses its pages. On leaving, the process's own
    setting comes back (glibc's default, or the user's through ``GLIBC_TUNABLES``), so large blocks allocated
    outside (validation's) are mapped and returned when freed. Nothing is done on a C library other than glibc."""
    mallopt = _glibc_function("mallopt")
    if mallopt is None or not mallopt(_M_MMAP_MAX, 0):
        yield
        return
    try:
        yield
    finally:
        mallopt(_M_MMAP_MAX, _starting_mmap_max())


def resident_bytes() -> int | None:
    """This process's current resident set size, or None where /proc is missing."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class FreedMemoryTrimmer:
    """Call ``after_batch`` when a batch's tensors are freed; it trims once RSS has grown by ``slack_bytes``, or by
    ``slack_share`` of the working set where that is more.

    A training step's working set is large and its char CNN's sizes vary with the batch's words, so at 64 MiB the
    trimmer handed a gigabyte back every few steps at 512 rows and the next step faulted it in again: ``elmo train``
    takes half the working set (docs/training.md)."""

    def __init__(self, slack_bytes: int = DEFAULT_SLACK_BYTES, slack_share: float = 0.0) -> None:
        self.slack_bytes = slack_bytes
        self.slack_share = slack_share
        self.trims = 0
        self._trim = _malloc_trim()
        self._baseline: int | None = None

    def after_batch(self) -> None:
        if self._trim is None:
            return
        resident = resident_bytes()
        if resident is None:
            return
        if self._baseline is None:  # the first batch, or the first after a trim: its working set is back in
            self._baseline = resident
        elif resident > self._baseline + max(self.slack_bytes, int(self.slack_share * self._baseline)):
            self._trim(0)
            self.trims += 1
            self._baseline = None
