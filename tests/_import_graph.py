"""The import graph of our packages, read with `ast` (nothing is imported or written).

Our packages are the ones pyproject.toml's `[tool.setuptools.packages.find] include` names.
An edge A -> B means module A imports module B anywhere: at the top, inside a function, under
`if TYPE_CHECKING:`, or by name through `importlib.import_module` / `__import__` (in a module
that calls either, every string constant naming one of our modules counts as an import of it,
so a table of module names handed to `import_module` is seen too). `from a import b` is an
edge to the module `a.b` when there is one, else to `a`; importing a submodule does not count
as importing its parent package's `__init__`.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["ROOT", "find_cycles", "graph_of_sources", "module_sources", "our_packages", "repo_graph"]

ROOT = Path(__file__).resolve().parents[1]
_DYNAMIC = {"import_module", "__import__"}


def our_packages(root: Path = ROOT) -> tuple[str, ...]:
    find = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    return tuple(sorted({pattern.rstrip("*").rstrip(".") for pattern in find["include"]}))


def module_sources(root: Path = ROOT, packages: Iterable[str] | None = None) -> dict[str, str]:
    """Module name -> source text of every module of our packages."""
    out: dict[str, str] = {}
    for package in packages if packages is not None else our_packages(root):
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path.read_text()
    return out


def _resolve(name: str, modules: set[str]) -> str | None:
    """The longest prefix of `name` that is one of our modules."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def _base_of(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    anchor = package[: len(package) - (node.level - 1)]
    return ".".join(anchor + ([node.module] if node.module else []))


def _imports(module: str, source: str, modules: set[str], packages: set[str]) -> set[str]:
    tree = ast.parse(source, filename=module)
    is_package = any(m.startswith(module + ".") for m in modules)
    found: set[str] = set()
    dynamic = False
    strings: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(r for alias in node.names if (r := _resolve(alias.name, modules)))
        elif isinstance(node, ast.ImportFrom):
            base = _base_of(module, is_package, node)
            for alias in node.names:
                target = _resolve(f"{base}.{alias.name}", modules) if base else None
                if target is None or target != f"{base}.{alias.name}":
                    target = _resolve(base, modules)
                if target is not None:
                    found.add(target)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            dynamic = dynamic or name in _DYNAMIC
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            strings.append(node.value)
    if dynamic:
        found.update(s for s in strings if "." in s and s.split(".")[0] in packages and s in modules)
    found.discard(module)
    return found


def graph_of_sources(sources: Mapping[str, str]) -> dict[str, set[str]]:
    """Module -> the modules of `sources` it imports."""
    modules = set(sources)
    packages = {m.split(".")[0] for m in modules}
    return {m: _imports(m, src, modules, packages) for m, src in sources.items()}


def repo_graph(root: Path = ROOT) -> dict[str, set[str]]:
    return graph_of_sources(module_sources(root))


def find_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One cycle (a -> ... -> a) for each group of modules that import each other, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(_a_cycle(graph, group) for group in groups)


def _a_cycle(graph: Mapping[str, set[str]], group: list[str]) -> list[str]:
    """A shortest cycle through the group's first module, written a -> ... -> a."""
    members = set(group)
    start = group[0]
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, set()) & members):
                if w == start:
                    return [*paths[v], start]
                if w not in paths:
                    paths[w] = [*paths[v], w]
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"{group} is not strongly connected")
