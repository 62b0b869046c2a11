"""The API's docstrings: every example runs as a doctest, and every public callable has one.

The objects covered are those ``docs/api.md`` renders: the functions of
``zarr_vectors.__all__``, the members of :class:`~zarr_vectors.Dataset` and
:class:`~zarr_vectors.Result`, the public functions of ``zarr_vectors.io.swc``,
``zarr_vectors.io.tractography``, ``zarr_vectors.io.export`` and ``zarr_vectors.plot``, and
:class:`~zarr_vectors.geo.CRS` with :func:`~zarr_vectors.geo.parse_crs`. A function or method
needs a numpydoc docstring with an ``Examples`` section (and a ``Parameters`` section when it
takes arguments); a property needs a summary. Each docstring's examples run in a fresh
namespace, from an empty working folder that must stay empty; ``memory://`` stores they
write are removed afterwards.
"""

from __future__ import annotations

import doctest
import inspect
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors import geo, plot
from zarr_vectors.io import export, swc, tractography

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
#: Functions documented on the top-level package (``validate`` and the entry layer's writers).
TOP_LEVEL = [n for n in zv.__all__ if inspect.isfunction(getattr(zv, n))]
#: Modules whose ``__all__`` functions are rendered, and the names rendered from ``geo``.
MODULES = [swc, tractography, export, plot]
GEO_NAMES = ["CRS", "parse_crs"]


def _members(cls: type, prefix: str) -> Iterator[tuple[str, Any, str]]:
    """``(name, object, kind)`` of the class's public methods and properties, in source order,
    its own first, then those it takes from the library's mixins (``Dataset``'s group and
    level methods)."""
    seen: set[str] = set()
    own = [k for k in cls.__mro__ if k.__module__.startswith("zarr_vectors")]
    for name, raw in [item for k in own for item in vars(k).items()]:
        if name.startswith("_") or name in seen:
            continue
        seen.add(name)
        if isinstance(raw, property):
            yield f"{prefix}.{name}", raw, "property"
        elif isinstance(raw, (classmethod, staticmethod)):
            yield f"{prefix}.{name}", raw.__func__, "method"
        elif inspect.isfunction(raw):
            yield f"{prefix}.{name}", raw, "method"


def documented() -> list[tuple[str, Any, str]]:
    """Every object whose docstring is checked: ``(dotted name, object, kind)``.

    ``kind`` is ``function``, ``method``, ``property`` or ``class`` (a class docstring's
    examples run, but it needs none).
    """
    out: list[tuple[str, Any, str]] = [(f"zarr_vectors.{n}", getattr(zv, n), "function") for n in TOP_LEVEL]
    for cls in (zv.Dataset, zv.Result, geo.CRS):
        prefix = f"{cls.__module__}.{cls.__qualname__}"
        out.append((prefix, cls, "class"))
        out += list(_members(cls, prefix))
    for module in MODULES:
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj):
                out.append((f"{module.__name__}.{name}", obj, "function"))
    out += [(f"zarr_vectors.geo.{n}", getattr(geo, n), "function") for n in GEO_NAMES if n != "CRS"]
    return out


OBJECTS = documented()
SECTION = re.compile(r"^\s*(Parameters|Returns|Yields|Raises|Examples)\n\s*-{3,}\s*$", re.MULTILINE)


def _takes_arguments(obj: Any) -> bool:
    params = list(inspect.signature(obj).parameters)
    return bool(params[1:] if params and params[0] in ("self", "cls") else params)


def docstring_problems(name: str, obj: Any, kind: str) -> list[str]:
    """What the docstring of ``obj`` lacks: a summary, ``Examples``, ``Parameters``."""
    doc = inspect.getdoc(obj)
    if not doc or not doc.strip():
        return [f"{name}: no docstring"]
    problems = []
    summary = doc.strip().splitlines()[0]
    if not summary.strip() or SECTION.match(summary):
        problems.append(f"{name}: no one-line summary")
    if kind in ("function", "method"):
        sections = set(SECTION.findall(doc))
        if "Examples" not in sections:
            problems.append(f"{name}: no Examples section")
        if _takes_arguments(obj) and "Parameters" not in sections:
            problems.append(f"{name}: no Parameters section")
    return problems


def run_examples(name: str, obj: Any) -> tuple[int, str]:
    """Run the examples of ``obj``'s own docstring in a fresh namespace: ``(examples, report)``."""
    finder = doctest.DocTestFinder(recurse=False)
    tests = finder.find(obj, name, module=False, globs={})
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report: list[str] = []
    with np.printoptions(precision=8, linewidth=75, threshold=1000, suppress=False):
        for test in tests:
            runner.run(test, out=report.append)
    return sum(len(t.examples) for t in tests), "".join(report)


@pytest.fixture
def clean_memory_filesystem() -> Iterator[None]:
    """Put fsspec's in-process ``memory://`` filesystem back as it was after the test."""
    from fsspec.implementations.memory import MemoryFileSystem

    store, dirs = dict(MemoryFileSystem.store), list(MemoryFileSystem.pseudo_dirs)
    try:
        yield
    finally:
        MemoryFileSystem.store.clear()
        MemoryFileSystem.store.update(store)
        MemoryFileSystem.pseudo_dirs[:] = dirs


@pytest.mark.parametrize(("name", "obj", "kind"), OBJECTS, ids=[n for n, _, _ in OBJECTS])
def test_docstring_examples_run(name, obj, kind, tmp_path, monkeypatch, clean_memory_filesystem):
    monkeypatch.chdir(tmp_path)
    count, report = run_examples(name, obj)
    assert not report, f"examples of {name} failed:\n{report}"
    if kind in ("function", "method"):
        assert count > 0, f"{name} has no example to run"
    left = sorted(p.name for p in tmp_path.iterdir())
    assert not left, f"examples of {name} left files behind in the working folder: {left}"


def test_every_public_callable_has_a_numpydoc_docstring_with_examples():
    problems = [p for name, obj, kind in OBJECTS for p in docstring_problems(name, obj, kind)]
    assert not problems, "docstrings to write or complete:\n" + "\n".join(problems)


def test_the_list_covers_what_the_api_page_renders():
    """Every object ``docs/api.md`` renders (bar the errors) is checked here, and the reverse."""
    api = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text(encoding="utf-8")
    rendered = set(re.findall(r"^::: ([\w.]+)", api, re.MULTILINE))
    for name in TOP_LEVEL:  # under its own name, or (wrapped writers) where its docstring lives
        f = getattr(zv, name)
        assert {f"zarr_vectors.{name}", f"{inspect.unwrap(f).__module__}.{name}"} & rendered, name
    top = {n for n in rendered if n.rsplit(".", 1)[-1] in TOP_LEVEL}
    checked = {"zarr_vectors.Dataset", "zarr_vectors.Result", "zarr_vectors.errors"}
    checked |= {m.__name__ for m in MODULES} | {f"zarr_vectors.geo.{n}" for n in GEO_NAMES}
    assert rendered - top == checked
    names = {n for n, _, _ in OBJECTS}
    assert {"zarr_vectors.dataset.core.Dataset.query", "zarr_vectors.result.Result.lines"} <= names
    assert {"zarr_vectors.plot.render", "zarr_vectors.geo.CRS.to_pyproj"} <= names


def _undocumented(x):
    return x


def _no_examples(x):
    """Return ``x``.

    Parameters
    ----------
    x
        Anything.
    """
    return x


def _wrong_example():
    """Two.

    Examples
    --------
    >>> 1 + 1
    3
    """


def test_the_checks_catch_what_they_are_meant_to():
    assert docstring_problems("f", _undocumented, "function") == ["f: no docstring"]
    assert docstring_problems("f", _no_examples, "function") == ["f: no Examples section"]
    assert docstring_problems("f", _wrong_example, "function") == []
    assert docstring_problems("p", zv.Dataset.ndim, "property") == []
    count, report = run_examples("_wrong_example", _wrong_example)
    assert count == 1 and "Expected:\n    3\nGot:\n    2" in report
