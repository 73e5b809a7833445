"""Lazily exported names: a public name that is also a submodule's name stays the public object, whichever of
the two was imported first (each order in a fresh interpreter, as the module cache decides it); ``dir`` lists a
name whose extra is missing only once it is installed, so ``help`` and ``inspect.getmembers`` work without it."""

import subprocess
import sys
from types import ModuleType

import pytest

import elmo.extras
from elmo.lazy import lazy_exports


@pytest.mark.parametrize("first", ["import elmo.search.senses", "from elmo.search import plot_senses",
                                   "from elmo.search import senses", "import elmo.search.neighbors"])
def test_a_name_that_is_also_a_submodule_is_the_function(first: str) -> None:
    pytest.importorskip("faiss")
    check = (f"{first}\nimport inspect\nfrom elmo.search import neighbors, senses\n"
             "assert inspect.isfunction(senses) and inspect.isfunction(neighbors), (senses, neighbors)\n")
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


def _lazy_package(monkeypatch: pytest.MonkeyPatch, name: str) -> ModuleType:
    """A fresh package ``name`` whose one lazy name, ``feature``, needs the ``search`` extra."""
    package = ModuleType(name)
    package.eager = 1  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, name, package)
    package.__getattr__, package.__dir__ = lazy_exports(  # type: ignore[attr-defined]
        name, {f"{name}.home": ("feature",)}, extra="search"
    )
    return package


def test_dir_lists_a_lazy_name_only_where_its_extra_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    package = _lazy_package(monkeypatch, "_lazy_dir_check")
    monkeypatch.setattr(elmo.extras, "_find", lambda module: object())
    assert "feature" in dir(package)
    monkeypatch.setattr(elmo.extras, "_find", lambda module: None if module == "faiss" else object())
    assert "feature" not in dir(package) and "eager" in dir(package)


def test_getmembers_and_help_work_without_the_extra_and_the_name_still_names_it() -> None:
    check = (
        "import inspect, pydoc\nimport elmo.extras\nelmo.extras._find = lambda module: None\n"
        "import elmo.search\nnames = [name for name, _ in inspect.getmembers(elmo.search)]\n"
        "assert 'build_index' not in names, names\npydoc.render_doc(elmo.search)\n"
        "try:\n    from elmo.search import build_index\nexcept elmo.extras.MissingExtra as error:\n    print(error)\n"
    )
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("elmo.search.build_index needs the 'search' extra")
