"""The package's import graph follows its layers (docs/architecture.md).

A module may import from its own layer or any layer below it, never above; no module imports
another module's underscore name; the only import cycle allowed is Result with its adapters
(:data:`RESULT_AND_ADAPTERS`: ``Result.plot()``, ``to_shapely()``, ``to_pandas()`` delegate to
them by function-level imports, and they take ``Result`` back). Every edge counts, none is
deleted before the cycles are looked for; an import inside ``if TYPE_CHECKING:`` is a
typing-only edge, and the cycle rule holds with those edges too. Each file is parsed once.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "zarr_vectors"

# Lowest first. A module belongs to the longest prefix listed; a module may import any module
# whose layer is at most its own.
LAYERS: list[tuple[str, ...]] = [
    ("zarr_vectors.errors", "zarr_vectors._extras", "zarr_vectors_draco"),
    ("zarr_vectors.format", "zarr_vectors.geo"),
    ("zarr_vectors.storage",),
    ("zarr_vectors.engine", "zarr_vectors._draco", "zarr_vectors.result", "zarr_vectors.tables"),
    ("zarr_vectors.kinds.", "zarr_vectors.pyramid.", "zarr_vectors.shapely_io"),
    ("zarr_vectors.kinds", "zarr_vectors.pyramid", "zarr_vectors.validation"),
    ("zarr_vectors.dataset", "zarr_vectors.dataset.groups", "zarr_vectors.dataset.levels"),
    ("zarr_vectors.collection", "zarr_vectors.api", "zarr_vectors.streaming", "zarr_vectors"),
    (
        "zarr_vectors.io",
        "zarr_vectors.icechunk",
        "zarr_vectors.dask",
        "zarr_vectors.cli",
        "zarr_vectors.cli.points",
        "zarr_vectors.cli.ingest",
        "zarr_vectors.cli.pyramid",
        "zarr_vectors.cli.arguments",
        "zarr_vectors.demo",
        "zarr_vectors.plot",
        "zarr_vectors.napari_plugin",
        "zarr_vectors.cli.neuroglancer",
        "zarr_vectors.cli.objects",
        "zarr_vectors.__main__",
        "zarr_vectors.neuroglancer",
    ),
]

# (importer, imported) pairs allowed to point upward: Result's function-level delegations.
UPWARD_ALLOWED = {
    ("zarr_vectors.result", "zarr_vectors.plot"),
    ("zarr_vectors.result", "zarr_vectors.shapely_io"),
    # zarr_vectors.serve: a function-level delegation to the Neuroglancer server (layer 7).
    ("zarr_vectors", "zarr_vectors.neuroglancer.server"),
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _layer(module: str) -> int:
    """Index of the most specific layer entry matching ``module``."""
    best, best_len = None, -1
    for index, entries in enumerate(LAYERS):
        for entry in entries:
            if entry.endswith("."):
                hit = module.startswith(entry)
            else:
                hit = module == entry or module.startswith(entry + ".")
            if hit and len(entry) > best_len:
                best, best_len = index, len(entry)
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS in tests/test_layers.py")
    return best


@functools.cache
def _tree(module: str) -> ast.Module:
    """The parsed source of ``module`` (each file parsed once per session)."""
    path = MODULES[module]
    return ast.parse(path.read_text(), str(path))


@functools.cache
def _face(package: str) -> dict[str, str]:
    """Names a package's ``__init__`` imports from its own modules -> the module they come from
    (empty for a module or a package that re-exports nothing)."""
    path = MODULES.get(package)
    if path is None or path.name != "__init__.py":
        return {}
    names = {}
    for node in _tree(package).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(package + "."):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                names[alias.asname or alias.name] = sub if sub in MODULES else node.module
    return names


@functools.cache
def _imports(module: str) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for each package import in ``module``."""
    path = MODULES[module]
    tree = _tree(module)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, None, node.lineno) for a in node.names if a.name.startswith("zarr_vectors")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if not base.startswith("zarr_vectors"):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in MODULES and alias.name not in _face(base):
                    found.append((sub, None, node.lineno))
                else:
                    found.append((base, alias.name, node.lineno))
    return found


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        _layer(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down_the_layers(module: str) -> None:
    upward = [
        f"line {line}: {target} (layer {_layer(target)}) from layer {_layer(module)}"
        for target, _name, line in _imports(module)
        if _layer(target) > _layer(module) and (module, target) not in UPWARD_ALLOWED
    ]
    assert not upward, f"{module} imports upward:\n" + "\n".join(upward)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_names_across_modules(module: str) -> None:
    private = [
        f"line {line}: {name} from {target}"
        for target, name, line in _imports(module)
        if name is not None and name.startswith("_") and target != module
    ]
    assert not private, f"{module} imports private names:\n" + "\n".join(private)


def test_the_layer_check_can_fail() -> None:
    """The checker sees an upward import and a private name when they are there."""
    assert _layer("zarr_vectors.format.grid") < _layer("zarr_vectors.engine.read.points")
    assert _layer("zarr_vectors.kinds.points") < _layer("zarr_vectors.kinds")
    assert _layer("zarr_vectors.dataset") < _layer("zarr_vectors.api")
    with pytest.raises(AssertionError, match="in no layer"):
        _layer("numpy")


def _exported(module: str) -> set[str] | None:
    """Names in ``module``'s ``__all__`` (None when it has none)."""
    tree = _tree(module)
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            assert isinstance(node.value, ast.List), f"{module}: __all__ is not a list"
            return {ast.literal_eval(e) for e in node.value.elts}
    return None


@pytest.mark.parametrize(
    "module", sorted(m for m in MODULES if m.startswith(("zarr_vectors.engine", "zarr_vectors.storage")))
)
def test_engine_names_other_modules_use_are_in_all(module: str) -> None:
    """The engine's API is what its modules list in ``__all__``: a name another module
    imports from an engine module must be listed there."""
    exported = _exported(module)
    assert exported is not None, f"{module} has no __all__"
    used = {
        (importer, name)
        for importer in MODULES
        if importer != module
        for target, name, _line in _imports(importer)
        if target == module and name is not None
    }
    unlisted = sorted(f"{name} (used by {importer})" for importer, name in used if name not in exported)
    assert not unlisted, f"{module} does not list in __all__: " + ", ".join(unlisted)


#: The one import cycle allowed: Result and the adapters it delegates to. A cycle of the
#: package must lie inside this set; a cycle reaching any other module fails the test.
RESULT_AND_ADAPTERS = frozenset(
    {"zarr_vectors.result", "zarr_vectors.plot", "zarr_vectors.shapely_io", "zarr_vectors.tables"}
)


@functools.cache
def _typing_only_lines(module: str) -> frozenset[int]:
    """Lines of the imports that sit inside an ``if TYPE_CHECKING:`` block of ``module``."""
    lines = set()
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            lines |= {
                n.lineno
                for stmt in node.body
                for n in ast.walk(stmt)
                if isinstance(n, (ast.Import, ast.ImportFrom))
            }
    return frozenset(lines)


def _graph(typing_only: bool) -> dict[str, set[str]]:
    """module -> modules it imports: an edge is kept when any import of the target runs
    (function-level imports included), or with ``typing_only`` also when all are typing-only.
    A name taken from a room's face is an edge to the face, which imports its whole room."""
    graph: dict[str, set[str]] = {}
    for module in MODULES:
        skip = set() if typing_only else _typing_only_lines(module)
        graph[module] = {t for t, _name, line in _imports(module) if t in MODULES and line not in skip} - {
            module
        }
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    cycles.append(sorted(comp))
    return cycles


def _wider_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    return [c for c in _cycles(graph) if not set(c) <= RESULT_AND_ADAPTERS]


@pytest.mark.parametrize("typing_only", [False, True], ids=["run-time", "with-typing-only"])
def test_no_import_cycle_but_result_and_its_adapters(typing_only: bool) -> None:
    wider = _wider_cycles(_graph(typing_only))
    assert not wider, "import cycles: " + "; ".join(" <-> ".join(c) for c in wider)


def test_the_cycle_check_sees_a_wider_cycle() -> None:
    """One extra edge that closes a loop through a module outside the allowed set (the
    ``plot -> io.export`` import this package once had) is reported, whole."""
    graph = _graph(typing_only=False)
    assert not _wider_cycles(graph)
    graph["zarr_vectors.plot"] = graph["zarr_vectors.plot"] | {"zarr_vectors.io.export"}
    graph["zarr_vectors.io.export"] = graph["zarr_vectors.io.export"] | {"zarr_vectors.result"}
    (cycle,) = _wider_cycles(graph)
    assert {"zarr_vectors.plot", "zarr_vectors.io.export", "zarr_vectors.result"} <= set(cycle)
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


#: Packages whose modules are imported from outside only through the package itself (its face).
ROOMS = (
    "zarr_vectors.storage",
    "zarr_vectors.engine",
    "zarr_vectors.dataset",
    "zarr_vectors.cli",
    "zarr_vectors.collection",
)


def _room(module: str) -> str | None:
    return next((r for r in ROOMS if module == r or module.startswith(r + ".")), None)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_outside_a_room_only_its_face_is_imported(module: str) -> None:
    past = [
        f"line {line}: {target}"
        for target, _name, line in _imports(module)
        if (room := _room(target)) is not None and target != room and _room(module) != room
    ]
    assert not past, f"{module} imports past a room's face:\n" + "\n".join(past)


@pytest.mark.parametrize(
    "importer, forbidden",
    [
        ("zarr_vectors.storage", "zarr_vectors.engine"),
        ("zarr_vectors.engine.read", "zarr_vectors.engine.write"),
        ("zarr_vectors.engine.write", "zarr_vectors.engine.read"),
    ],
)
def test_room_doors_are_one_way(importer: str, forbidden: str) -> None:
    inside = [m for m in MODULES if m == importer or m.startswith(importer + ".")]
    assert inside, f"no modules under {importer}"
    wrong = [
        f"{m} line {line}: {target}"
        for m in inside
        for target, _name, line in _imports(m)
        if target == forbidden or target.startswith(forbidden + ".")
    ]
    assert not wrong, "\n".join(wrong)
