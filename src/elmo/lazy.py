"""A package's public names imported on first use (PEP 562).

``import elmo`` and ``elmo --help`` import every package the commands live in; with the names loaded lazily
none of that imports PyTorch. A package whose features need an extra (``elmo.search``: faiss) checks it when
a name is first used, so ``from elmo.search import build_index`` without faiss is one line naming
the ``search`` extra, before any work starts. ``dir()`` lists such names only where the extra is installed, so
``help`` and ``inspect.getmembers`` work without it. Reading one, ``hasattr`` included, still raises
``MissingExtra``, an ImportError: raised as an AttributeError, ``from ... import`` would replace its message by a
bare "cannot import name".

Usage, in a package's ``__init__.py`` (with the same names imported under ``TYPE_CHECKING`` for type checkers)::

    __getattr__, __dir__ = lazy_exports(__name__, {"elmo.search.build": ("build_index",)}, extra="search")
"""

import sys
from collections.abc import Callable, Iterable, Mapping
from importlib import import_module
from types import ModuleType
from typing import Any

from elmo.extras import missing_modules, require


def lazy_exports(package: str, homes: Mapping[str, Iterable[str]], extra: str | None = None,
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package``: each name in ``homes`` (module ->
    names) is imported from its module when first read, after ``extra`` is checked (``elmo.extras.require``),
    and kept in the package's namespace. Any other name is an AttributeError, so ``from package import
    submodule`` still imports the submodule."""
    home_of = {name: module for module, names in homes.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in home_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if extra is not None:
            require(extra, f"{package}.{name}")
        value = getattr(import_module(home_of[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        """The lazy names only where their extra is installed: ``inspect.getmembers`` and ``help`` read every name
        that ``dir`` lists, and one whose extra is missing raises ``MissingExtra``, an ImportError they let through."""
        listed = set(vars(sys.modules[package]))
        if extra is None or not missing_modules(extra):
            listed |= set(home_of)
        return sorted(listed)

    class LazyPackage(ModuleType):
        """Importing a submodule sets it as the package's attribute of its name: where a public name is also a
        submodule's (``elmo.search.senses``, the function, and the module ``senses.py``), the name wins, as it
        did with eager imports, so ``from elmo.search import senses`` is the function whatever was imported."""

        def __setattr__(self, name: str, value: Any) -> None:
            if name in home_of and isinstance(value, ModuleType) and value.__name__ == f"{package}.{name}":
                value = getattr(value, name)
            super().__setattr__(name, value)

    sys.modules[package].__class__ = LazyPackage
    return __getattr__, __dir__
