"""Freed memory goes back to the system once the process has grown by the slack, and not before."""

import pytest

from elmo.memory import FreedMemoryTrimmer, _malloc_trim, resident_bytes

pytestmark = pytest.mark.skipif(FreedMemoryTrimmer()._trim is None or resident_bytes() is None,
                                reason="needs glibc and /proc")
MiB = 2**20


@pytest.fixture(autouse=True)
def a_trimmed_heap() -> None:
    """Each test starts from a heap whose freed pages went back to the system. A process that trained a model
    before (``keep_freed_memory``: glibc no longer trims on its own) holds freed pages that a test's allocations
    would reuse without growing."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


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


def test_a_working_set_faulted_back_in_after_a_trim_is_not_trimmed_again():
    """The batch after a trim brings its working set back; measured from the trimmed RSS, that is growth, and every
    batch would trim and fault its pages in again (as ``elmo train`` did each step)."""
    trimmer = FreedMemoryTrimmer(slack_bytes=64 * MiB)
    trimmer.after_batch()
    pinned = fragment_the_heap(2000)
    trimmer.after_batch()
    assert trimmer.trims == 1
    for _ in range(3):  # batches of the same size as the one before the trim
        del pinned
        pinned = fragment_the_heap(2000)
        trimmer.after_batch()
    assert trimmer.trims == 1
    del pinned


def test_a_slack_share_of_the_working_set_leaves_growth_below_it_alone_and_trims_above_it():
    """``elmo train``'s trimmer: its slack is a share of the working set (the RSS at the batch after a trim)."""
    for share_bytes, trims in ((400 * MiB, 0), (100 * MiB, 1)):
        _malloc_trim()(0)  # the freed heap of the round before would take the next round's blocks without growing
        trimmer = FreedMemoryTrimmer(slack_bytes=0, slack_share=share_bytes / resident_bytes())
        trimmer.after_batch()  # the baseline
        pinned = fragment_the_heap(2000)  # 200 MiB touched, then freed
        trimmer.after_batch()
        assert trimmer.trims == trims
        del pinned


def test_growth_within_the_slack_is_left_alone():
    trimmer = FreedMemoryTrimmer(slack_bytes=4096 * MiB)
    trimmer.after_batch()
    pinned = fragment_the_heap(500)
    trimmer.after_batch()
    assert trimmer.trims == 0
    del pinned


# A training step in miniature, in a fresh process: 32 MiB in blocks of the given size allocated with malloc,
# written and freed, the same every step; printed: the page faults of steps 4 to 8, the pages they wrote, and the RSS
# a 256 MiB block allocated after the steps (as validation's logits are) leaves behind once freed.
_STEPS = """
import contextlib, resource, sys
from glibc_probe import LIBC, resident_left_by_a_freed_block, written_block
from elmo.memory import keep_freed_memory, large_blocks_from_heap
if sys.argv[1] != "glibc":
    assert keep_freed_memory()
scope = large_blocks_from_heap if sys.argv[1] == "heap" else contextlib.nullcontext
size, count = int(sys.argv[2]), 32 * 2**20 // int(sys.argv[2])
def step():
    with scope():
        for block in [written_block(size) for _ in range(count)]:
            LIBC.free(block)
for _ in range(3):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    step()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(faults, 5 * count * size // 4096, resident_left_by_a_freed_block())
"""


def _steps(mode: str, block_bytes: int = MiB, malloc_settings: dict[str, str] | None = None) -> tuple[int, int, int]:
    """(page faults of five steps of 32 MiB in blocks of ``block_bytes``, pages they wrote, bytes a 256 MiB block
    allocated and freed after the steps leaves resident), in a process started with ``malloc_settings`` as its
    only glibc settings in the environment."""
    from glibc_probe import run_probe  # loads glibc: only where the module's tests run

    faults, pages, kept = run_probe(_STEPS, mode, str(block_bytes), malloc_settings=malloc_settings).split()
    return int(faults), int(pages), int(kept)


def test_kept_memory_is_reused_without_faulting_the_pages_in_again():
    """glibc on its own hands the freed 32 MiB back at each step's end (past its trim threshold, which it raises to
    twice the largest block it has mmapped and freed) and the next step faults every page in again; after
    ``keep_freed_memory`` the steps reuse them."""
    faults, pages, _ = _steps("glibc")
    assert faults > pages * 9 // 10
    faults, pages, _ = _steps("keep")
    assert faults < pages // 100


def test_a_block_above_glibcs_largest_mmap_threshold_is_reused_within_large_blocks_from_heap():
    """A 32 MiB block (a training step's gates at 512 rows are larger) is one glibc maps on its own and unmaps when
    freed, whatever the threshold: every step faulted it in again, unless the step runs in
    ``large_blocks_from_heap``."""
    faults, pages, _ = _steps("keep", 32 * MiB)
    assert faults > pages * 9 // 10
    faults, pages, _ = _steps("heap", 32 * MiB)
    assert faults < pages // 100


def test_a_large_block_allocated_after_large_blocks_from_heap_goes_back_to_the_system_when_freed():
    """Outside the steps glibc maps large blocks again, so validation's logits are returned when freed rather than
    kept in a heap that glibc no longer trims (``M_MMAP_MAX`` 0 for the whole run grew a validating process to
    23.4 GB)."""
    _, _, kept = _steps("heap", 32 * MiB)
    assert kept < 16 * MiB


@pytest.mark.parametrize(("malloc_settings", "kept_in_heap"), [
    ({"GLIBC_TUNABLES": "glibc.malloc.mmap_max=0"}, True),
    ({"GLIBC_TUNABLES": "glibc.malloc.check=0:glibc.malloc.mmap_max=0x0"}, True),
    ({"MALLOC_MMAP_MAX_": "0"}, True),
    ({"GLIBC_TUNABLES": "glibc.malloc.mmap_max=0", "MALLOC_MMAP_MAX_": "65536"}, True),
    ({"GLIBC_TUNABLES": "glibc.malloc.mmap_max=65536", "MALLOC_MMAP_MAX_": "0"}, False),
])
def test_large_blocks_from_heap_gives_back_the_users_own_mmap_max(malloc_settings: dict[str, str],
                                                                   kept_in_heap: bool):
    """On leaving, glibc's mapping comes back as the user set it at the start, not glibc's default: with
    ``mmap_max`` 0 (no block mapped) the 256 MiB block allocated after the steps stays in the heap, as it does
    without the steps' setting ("keep"), where restoring the default would map it and return it when freed.
    ``GLIBC_TUNABLES`` wins over the older variable, as in glibc."""
    _, _, kept_by_glibc = _steps("keep", 32 * MiB, malloc_settings)
    _, _, kept = _steps("heap", 32 * MiB, malloc_settings)
    assert (kept_by_glibc > 200 * MiB) == kept_in_heap
    assert (kept > 200 * MiB) == kept_in_heap
