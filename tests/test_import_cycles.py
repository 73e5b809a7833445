"""No import cycles among the package's modules: the graph of module-level ``import`` statements (imports inside
functions are deferred on purpose and left out; so are those under ``if TYPE_CHECKING``) has no cycle."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "elmo"


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_level_imports(path: Path, modules: set[str], package_root: Path = PACKAGE) -> set[str]:
    """The package modules ``path`` imports when it is imported (``from a import b`` counts ``a.b`` when that is
    a module, else ``a``)."""
    name = module_name(path, package_root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(node.orelse)
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parent, *([node.module] if node.module else [])])
                found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                             for alias in node.names)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return {module for module in found if module in modules and module != name}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return [*path[path.index(target):], target]
            if target not in state and (cycle := walk(target)):
                return cycle
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := walk(node)):
            return cycle
    return None


def test_the_cycle_finder_finds_a_planted_cycle_and_accepts_a_tree():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


@pytest.mark.parametrize("relative", ["from . import x", "from .x import y"])
def test_relative_imports_resolve_to_package_modules(tmp_path: Path, relative: str):
    package = tmp_path / "elmo"
    (package / "sub").mkdir(parents=True)
    for name in ("__init__.py", "sub/__init__.py", "sub/x.py"):
        (package / name).write_text("")
    (package / "sub" / "user.py").write_text(relative + "\n")
    modules = {module_name(path, package) for path in package.rglob("*.py")}
    assert module_level_imports(package / "sub" / "user.py", modules, package) == {"elmo.sub.x"}


def test_the_package_has_no_import_cycle():
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(path) for path in paths}
    graph = {module_name(path): module_level_imports(path, modules) for path in paths}
    assert len(graph) > 100 and graph["elmo.embedder"] >= {"elmo.bilm", "elmo.layer_choice"}
    assert find_cycle(graph) is None
