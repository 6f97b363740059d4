"""Data flows one way (STYLE.md): each package imports only itself and lower layers, and no
modules import each other in a circle. Read from the source with ``ast``; nothing is imported.

Layers (lowest first); a top-level module (``errors.py``, ``cli.py``) is its own "package":

    0  errors, settings, executor, data
    1  features, models
    2  stats
    3  classify, generation, counterfactual
    4  evaluation
    5  pipeline
    6  report
    7  api, commands, cli, __init__, __main__
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
ROOT = "zdebias"
LAYERS: dict[str, int] = {
    **dict.fromkeys(("errors", "settings", "settings_cli", "executor", "data"), 0),
    **dict.fromkeys(("features", "models"), 1),
    "stats": 2,
    **dict.fromkeys(("classify", "generation", "counterfactual"), 3),
    "evaluation": 4,  # evaluates classify's classifiers; classify never imports it
    "pipeline": 5,
    "report": 6,
    **dict.fromkeys(("api", "commands", "cli", "__init__", "__main__"), 7),
}

#: Imports that break the layering, as ``(importing module, imported module)``: none; the test
#: fails when an entry is no longer needed, so an exception has to be argued for here.
KNOWN_VIOLATIONS: set[tuple[str, str]] = set()
#: Import cycles (module-level imports) that exist today, each as its sorted modules.
KNOWN_CYCLES: set[tuple[str, ...]] = set()


def _modules() -> dict[str, Path]:
    """Dotted module name → file, for every module of the package."""
    out = {}
    for path in sorted((SRC / ROOT).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _component(module: str) -> str:
    """The layered unit of a module: ``zdebias.stats.zfilter`` → ``stats``."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return parts[1]


def _resolve(module: str, node: ast.ImportFrom) -> str:
    """The absolute module an ``from X import ...`` statement names."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not _is_package(module):
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The zdebias modules an import statement loads (a submodule when it names one)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = _resolve(module, node)
        names = [
            f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
            for alias in node.names
        ]
    for name in names:
        if name == ROOT or name.startswith(ROOT + "."):
            while name not in MODULES and "." in name:  # zdebias.x.attr → zdebias.x
                name = name.rsplit(".", 1)[0]
            yield name


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(module: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement of a module, with whether it runs when the module is imported
    (module level, class bodies, not inside functions or ``if TYPE_CHECKING:``)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))

    def walk(node: ast.AST, at_import: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, at_import
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                yield from walk(child, False)
            elif isinstance(child, ast.If) and _is_type_checking(child):
                yield from walk(child, False)
            else:
                yield from walk(child, at_import)

    yield from walk(tree, True)


def _edges() -> Iterator[tuple[str, str, bool]]:
    for module in MODULES:
        for node, at_import in _imports(module):
            for target in _targets(module, node):
                yield module, target, at_import


def test_every_package_has_a_layer() -> None:
    missing = sorted({_component(m) for m in MODULES} - set(LAYERS))
    assert not missing, f"packages without a layer in {__file__}: {missing}"


def test_imports_go_to_the_same_or_a_lower_layer() -> None:
    found = set()
    for module, target, _ in _edges():
        a, b = _component(module), _component(target)
        if a != b and LAYERS.get(b, 99) > LAYERS.get(a, -1):
            found.add((module, target))
    new = sorted(found - KNOWN_VIOLATIONS)
    assert not new, "imports up the layers (see this file's docstring):\n" + "\n".join(
        f"  {m} -> {t}  ({_component(m)} {LAYERS.get(_component(m))} -> "
        f"{_component(t)} {LAYERS.get(_component(t))})"
        for m, t in new
    )
    fixed = sorted(KNOWN_VIOLATIONS - found)
    assert not fixed, f"fixed, remove from KNOWN_VIOLATIONS: {fixed}"


def _cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """Strongly connected components with more than one module, or a module importing
    itself (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    out.append(tuple(sorted(component)))
    return out


def test_no_import_cycles() -> None:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, target, at_import in _edges():
        if at_import and target != module:
            graph[module].add(target)
    found = set(_cycles(graph))
    new = sorted(found - KNOWN_CYCLES)
    assert not new, f"module-level import cycles: {new}"
    fixed = sorted(KNOWN_CYCLES - found)
    assert not fixed, f"fixed, remove from KNOWN_CYCLES: {fixed}"


def _loads(module: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The zdebias modules an import statement needs loaded: :func:`_targets`, and for
    ``from pkg import name`` the package ``pkg`` itself too (its ``__init__`` runs first)."""
    yield from _targets(module, node)
    if isinstance(node, ast.ImportFrom):
        base = _resolve(module, node)
        if base in MODULES and _is_package(base):
            yield base


def test_no_import_cycles_even_through_lazy_imports() -> None:
    """No circle either when imports inside functions count (issue 31): a lazy import that
    closes a circle only hides it. Plug-ins register from the package that loads them."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module in MODULES:
        for node, _ in _imports(module):
            graph[module].update(t for t in _loads(module, node) if t != module)
    found = _cycles(graph)
    assert not found, "import cycles (lazy imports included):\n" + "\n".join(
        "  " + " -> ".join(c) for c in found
    )


def test_cycle_finder_and_resolver() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [("a", "b", "c")]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    node = ast.parse("from ..data import labels").body[0]
    assert isinstance(node, ast.ImportFrom)
    assert list(_targets("zdebias.stats.zfilter", node)) == ["zdebias.data.labels"]
    assert _component("zdebias.stats.zfilter") == "stats" and _component("zdebias") == "__init__"
    package = ast.parse("from zdebias.data import hf").body[0]
    assert isinstance(package, ast.ImportFrom)
    assert list(_loads("zdebias.data.readers", package)) == ["zdebias.data.hf", "zdebias.data"]


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_layer_names_are_real(package: str) -> None:
    """A layer entry that names nothing is a typo (``__main__`` may be absent)."""
    if package != "__main__":
        assert any(_component(m) == package for m in MODULES), package
