"""The package's import graph follows its layers (docs/architecture.md).

A module may import from its own layer or any layer below it, never above; no module imports
another module's underscore name; the only import cycle allowed is Result's thin delegation to
plotting and shapely (function-level imports in ``result.py``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "zarr_vectors"

# Lowest first. A module belongs to the longest prefix listed; a module may import any module
# whose layer is at most its own.
LAYERS: list[tuple[str, ...]] = [
    ("zarr_vectors.errors", "zarr_vectors._extras", "zarr_vectors_draco"),
    ("zarr_vectors.format", "zarr_vectors.geo"),
    ("zarr_vectors.engine", "zarr_vectors._draco", "zarr_vectors.result", "zarr_vectors.tables"),
    ("zarr_vectors.kinds.", "zarr_vectors.pyramid.", "zarr_vectors.shapely_io"),
    ("zarr_vectors.kinds", "zarr_vectors.pyramid", "zarr_vectors.validation"),
    ("zarr_vectors.dataset", "zarr_vectors.dataset_groups", "zarr_vectors.dataset_levels"),
    ("zarr_vectors.api", "zarr_vectors.streaming", "zarr_vectors"),
    (
        "zarr_vectors.io",
        "zarr_vectors.icechunk",
        "zarr_vectors.dask",
        "zarr_vectors.cli",
        "zarr_vectors.cli_points",
        "zarr_vectors.cli_ingest",
        "zarr_vectors.cli_pyramid",
        "zarr_vectors.cli_types",
        "zarr_vectors.demo",
        "zarr_vectors.plot",
        "zarr_vectors.napari_plugin",
        "zarr_vectors.cli_neuroglancer",
        "zarr_vectors.cli_objects",
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


def _imports(module: str) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for each package import in ``module``."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
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
                if sub in MODULES:
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
    assert _layer("zarr_vectors.format.grid") < _layer("zarr_vectors.engine.read")
    assert _layer("zarr_vectors.kinds.points") < _layer("zarr_vectors.kinds")
    assert _layer("zarr_vectors.dataset") < _layer("zarr_vectors.api")
    with pytest.raises(AssertionError, match="in no layer"):
        _layer("numpy")


def _exported(module: str) -> set[str] | None:
    """Names in ``module``'s ``__all__`` (None when it has none)."""
    tree = ast.parse(MODULES[module].read_text())
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


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("zarr_vectors.engine")))
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


def _runtime_edges(module: str) -> set[str]:
    """Modules ``module`` imports when run (``if TYPE_CHECKING:`` blocks left out)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    found = {t for t, _n, _l in _imports(module)}
    typing_only = set()
    for node in ast.walk(tree):
        if id(node) in skip and isinstance(node, ast.ImportFrom) and node.module:
            typing_only.add(node.module)
    return {t for t in found if t in MODULES and t != module and t not in typing_only}


def test_no_import_cycles_but_results_delegations() -> None:
    graph = {m: _runtime_edges(m) - {"zarr_vectors"} for m in MODULES}
    for importer, target in UPWARD_ALLOWED:
        graph[importer].discard(target)
    # Tarjan's strongly connected components.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)
