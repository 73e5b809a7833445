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


def _declared_names(init_file) -> tuple[set[str], dict[str, set[str]], dict[str, set[str]]]:
    """An ``__init__.py``'s ``__all__``, its ``lazy_exports`` map (module -> names) and its ``TYPE_CHECKING``
    imports (module -> names), read from its syntax tree (importing would load the names' modules)."""
    import ast

    tree = ast.parse(init_file.read_text(encoding="utf-8"))
    listed: set[str] = set()
    lazy: dict[str, set[str]] = {}
    typed: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            listed = set(ast.literal_eval(node.value))
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                getattr(node.value.func, "id", None) == "lazy_exports":
            lazy = {module: set(names) for module, names in ast.literal_eval(node.value.args[1]).items()}
        elif isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom):
                    typed.setdefault(statement.module, set()).update(alias.name for alias in statement.names)
    return listed, lazy, typed


@pytest.mark.parametrize("package", ["elmo", "elmo.training", "elmo.tasks", "elmo.serve", "elmo.search",
                                     "elmo.embed_job"])
def test_each_package_lists_its_public_names_alike_in_all_the_lazy_map_and_the_type_checking_imports(package):
    """Each public name is written three times in its package's ``__init__.py``; they must not drift apart."""
    from pathlib import Path

    import elmo

    init_file = Path(elmo.__file__).parent.joinpath(*package.split(".")[1:], "__init__.py")
    listed, lazy, typed = _declared_names(init_file)
    assert lazy, f"{init_file} has no lazy_exports map"
    assert lazy == typed, f"{init_file}: the lazy map and the TYPE_CHECKING imports differ"
    assert set().union(*lazy.values()) <= listed, f"{init_file}: lazy names missing from __all__"
    assert listed - set().union(*lazy.values()) <= {"__version__"}, f"{init_file}: __all__ holds eager names"
