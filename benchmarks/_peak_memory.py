"""A benchmark process's own peak resident memory.

``getrusage``'s ``ru_maxrss`` survives ``exec``: a child process started by a benchmark reports at least the RSS
its parent had when it forked, so a case smaller than its parent reads as the parent's figure. Linux's ``VmHWM``
(in /proc/self/status) is the high-water mark of the process's own address space, which ``exec`` starts afresh.
"""

import resource
import sys
from pathlib import Path

STATUS = Path("/proc/self/status")


def peak_rss_mib() -> float:
    """This process's peak RSS in MiB: ``VmHWM`` where /proc exists, else ``ru_maxrss`` (which may include the
    parent's RSS at the fork)."""
    if STATUS.exists():
        for line in STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # "VmHWM:   300424 kB"
    ru_maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return ru_maxrss / 2**20 if sys.platform == "darwin" else ru_maxrss / 1024  # bytes on macOS, KiB elsewhere
