"""glibc's malloc probed in a fresh process (malloc's settings and heap are the process's own: in a long test
session earlier work leaves a heap that takes or returns a block on its own terms).

A probe script imports ``LIBC`` and ``resident_left_by_a_freed_block`` from here: blocks allocated through ctypes,
so that nothing else the process allocates lands between them.
"""

import ctypes
import os
import subprocess
import sys
from pathlib import Path

from elmo.memory import resident_bytes

LIBC = ctypes.CDLL("libc.so.6")
LIBC.malloc.restype = ctypes.c_void_p
LIBC.malloc.argtypes = [ctypes.c_size_t]
LIBC.free.argtypes = [ctypes.c_void_p]

PROBE_BLOCK_BYTES = 256 * 2**20  # the size of validation's logits at 512 rows, past every mmap threshold


def written_block(size: int) -> int:
    """The address of a new block of ``size`` bytes, every page written (so resident)."""
    block = LIBC.malloc(size)
    ctypes.memset(block, 1, size)
    return block


def resident_left_by_a_freed_block(size: int = PROBE_BLOCK_BYTES) -> int:
    """Resident bytes that a block allocated, written and freed leaves behind: about ``size`` where it came from the
    heap and stayed there, near 0 where glibc mapped it and unmapped it when freed."""
    before = resident_bytes()
    LIBC.free(written_block(size))
    return resident_bytes() - before


def run_probe(script: str, *arguments: str, malloc_settings: dict[str, str] | None = None) -> str:
    """``script``'s stdout, run with ``arguments`` in a fresh Python whose only glibc malloc settings are
    ``malloc_settings`` (the user's ``GLIBC_TUNABLES`` and ``MALLOC_*`` would move the thresholds probed)."""
    environment = {name: value for name, value in os.environ.items()
                   if name != "GLIBC_TUNABLES" and not name.startswith("MALLOC_")}
    here = str(Path(__file__).parent)
    environment["PYTHONPATH"] = os.pathsep.join([here, *filter(None, [environment.get("PYTHONPATH")])])
    done = subprocess.run([sys.executable, "-c", script, *arguments], capture_output=True, text=True, check=True,
                          env={**environment, **(malloc_settings or {})})
    return done.stdout
