"""Lazily exported names: a public name that is also a submodule's name stays the public object, whichever of
the two was imported first (each order in a fresh interpreter, as the module cache decides it)."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize("first", ["import elmo.search.senses", "from elmo.search import plot_senses",
                                   "from elmo.search import senses", "import elmo.search.neighbors"])
def test_a_name_that_is_also_a_submodule_is_the_function(first: str) -> None:
    pytest.importorskip("faiss")
    check = (f"{first}\nimport inspect\nfrom elmo.search import neighbors, senses\n"
             "assert inspect.isfunction(senses) and inspect.isfunction(neighbors), (senses, neighbors)\n")
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
