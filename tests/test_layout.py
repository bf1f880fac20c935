"""The house keeps its shape: every import in service/ points down the layers, no module imports itself back
through others, no module outgrows 600 lines, and the engine, the generated code and grpc stay in their rooms.

Plain `ast` over the tree: every import statement counts, also those inside functions and under TYPE_CHECKING
(a late import is still a door between two rooms)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SERVICE = Path(__file__).parents[1] / "service"

# Bottom to top; a package may import its own rank or below. Top-level utility modules sit at the bottom.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("physics", "money", "memo", "children"),
    ("domain",),
    ("engine",),
    ("render",),
    ("decide",),
    ("wire",),
    ("rulebook",),
    ("market",),  # the offer pipeline sits on the rules loader and imports down (issue 34 item 10)
    ("serving",),
    ("frontends",),
    ("bench", "accuracy", "__main__"),
)
RANK = {room: i for i, rooms in enumerate(LAYERS) for room in rooms}
# The formulas import nothing of the service; they are the checkable core.
PURE = ("physics", "money")
MAX_LINES = 600
MAX_TOP_LEVEL_MODULES = 6
# Third-party imports allowed only in these rooms.
ONLY_IN = {
    "durable_rules": ("engine.durable",),
    "gpuadvisor": ("wire.api",),  # the generated proto code
    "grpc": ("serving", "frontends", "bench"),
}


def modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(SERVICE.rglob("*.py")):
        rel = path.relative_to(SERVICE)
        if rel.parts[0] == "gen":
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path


def imports_of(name: str, path: Path) -> Iterator[tuple[str, int]]:
    """(absolute module name without the `service.` prefix, or a third-party top name; line) per import."""
    is_pkg = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")
                yield (".".join(top[1:]) if top[0] == "service" else top[0]), node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                mod = node.module or ""
                if mod.split(".")[0] != "service":
                    yield mod.split(".")[0], node.lineno
                    continue
                base = mod.split(".")[1:]
            else:
                here = name.split(".") if name else []
                pkg = here if is_pkg else here[:-1]
                base = pkg[: len(pkg) - (node.level - 1)] + (node.module.split(".") if node.module else [])
            for alias in node.names:
                # `from . import x` names a module when x is one; else the import is of the package itself
                candidate = ".".join([*base, alias.name])
                yield (candidate if candidate in ALL else ".".join(base)), node.lineno


ALL = {name for name, _ in modules()}


def room(module: str) -> str:
    return module.split(".")[0] if module else ""


def graph() -> dict[str, set[str]]:
    return {name: {m for m, _ in imports_of(name, path) if m in ALL and m != name} for name, path in modules()}


def test_every_module_has_a_room() -> None:
    for name, _ in modules():
        if name:
            assert room(name) in RANK, f"service/{name.replace('.', '/')}: a package with no place in LAYERS"


def test_imports_only_point_down() -> None:
    wrong = []
    for name, path in modules():
        if not name:
            continue
        for target, line in imports_of(name, path):
            if target in ALL and target and RANK[room(target)] > RANK[room(name)]:
                wrong.append(f"service/{path.relative_to(SERVICE)}:{line} {name} imports {target} (upward)")
    assert not wrong, "\n".join(wrong)


def test_formulas_import_nothing_of_the_service() -> None:
    wrong = [
        f"{name} imports {target}"
        for name, path in modules() if room(name) in PURE
        for target, _ in imports_of(name, path) if target in ALL and room(target) not in PURE
    ]
    assert not wrong, wrong


def _cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle() -> None:
    g = graph()
    # Importing a package runs its __init__, so a module importing its own package is not a circle here.
    for name in g:
        g[name] = {t for t in g[name] if not name.startswith(t + ".")}
    assert _cycles(g) == []


def test_the_circle_finder_finds_circles() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("name,path", list(modules()), ids=lambda x: str(x))
def test_module_size(name: str, path: Path) -> None:
    lines = path.read_text().count("\n")
    assert lines <= MAX_LINES, f"service/{path.relative_to(SERVICE)} has {lines} lines (at most {MAX_LINES})"


def test_few_modules_directly_in_service() -> None:
    top = sorted(p.name for p in SERVICE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def test_packages_say_what_they_own() -> None:
    for init in SERVICE.glob("*/__init__.py"):
        if init.parent.name == "gen":
            continue
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and "import" in doc, f"{init.relative_to(SERVICE)}: a docstring saying what it owns and imports"


def test_third_party_engines_stay_in_their_rooms() -> None:
    wrong = []
    for name, path in modules():
        for target, line in imports_of(name, path):
            allowed = ONLY_IN.get(target)
            if allowed and not any(name == a or name.startswith(a + ".") or room(name) == a for a in allowed):
                wrong.append(f"service/{path.relative_to(SERVICE)}:{line} imports {target}")
    assert not wrong, "\n".join(wrong)
