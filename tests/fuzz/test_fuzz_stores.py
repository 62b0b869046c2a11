"""Seeded corruptions of every kind of store (see ``runner.py`` for the outcomes).

Every case copies a base store (kind x compression), applies one mutation with seed 0 and
runs ``open``, a box query, ``objects()``, ``read()`` and ``validate()`` in a child process
under a 1.5 GiB address-space limit and a 20 s timeout. Each operation must give the
library's error or the pristine store's answer, and ``validate()`` a report that is not ok
whenever a reader noticed the damage. The cases run once per session, two children at a
time; ``-k`` selects cases by id. Replay one with its tracebacks::

    .venv/bin/python benchmarks/fuzz_stores.py --case points/zstd/bomb/0

:data:`KNOWN_FAILING` lists the cases that fail today because of reader code being fixed
elsewhere (bounded decoders, decode failures as CorruptCellError, missing cells as errors,
checksums); each is a strict xfail, so a case that starts passing fails the suite until it
is taken off the list.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from .child import parse_case
from .mutations import MUTATIONS
from .runner import classify, explain, failures, run, scratch_dir
from .stores import COMPRESSIONS, KINDS, build

SEED = 0
#: A gzip bomb takes 5 to 20 s per decode until the decoders are bounded: they run in
#: benchmarks/fuzz_stores.py (the zstd and Blosc bombs run here).
SLOW = [f"{k}/gzip/bomb/{SEED}" for k in KINDS]
CASES = [f"{k}/{c}/{m}/{SEED}" for k in KINDS for c in COMPRESSIONS for m in MUTATIONS]
CASES = [c for c in CASES if c not in SLOW]

#: case id -> the failing outcomes seen when it was listed; all in reader code outside the
#: validator (see FUZZ_FINDINGS.md). Regenerate with
#: ``benchmarks/fuzz_stores.py --seeds 1 --exclude '*/gzip/bomb/*' --print-known``.
KNOWN_FAILING: dict[str, str] = {
    "points/none/bitflip/0": "objects,read: WRONG",
    "points/none/delete_json/0": "query,read: WRONG",
    "points/none/nonutf8_json/0": "query,objects,read: RAISE UnicodeDecodeError",
    "points/none/json_dtype/0": "query,objects,read: RAISE ValueError",
    "points/none/json_shape/0": "query,objects,read: RAISE ZeroDivisionError",
    "points/none/json_root/0": "open: WRONG",
    "points/zstd/bitflip/0": "query,objects,read: WRONG",
    "points/zstd/nonutf8_json/0": "query,objects,read: RAISE UnicodeDecodeError",
    "points/zstd/deep_json/0": "query,objects,read: RAISE RecursionError",
    "points/zstd/bomb/0": "query,objects,read: MEMORY",
    "points/gzip/bitflip/0": "query,objects,read: RAISE BadGzipFile",
    "points/gzip/truncate/0": "query,objects,read: RAISE EOFError",
    "points/gzip/zero/0": "query,objects,read: RAISE BadGzipFile",
    "points/gzip/nonutf8_json/0": "query,objects,read: RAISE UnicodeDecodeError",
    "points/gzip/deep_json/0": "query,objects,read: RAISE RecursionError",
    "points/gzip/json_shape/0": "query,objects,read: RAISE ZeroDivisionError",
    "points/blosc/bitflip/0": "read: WRONG",
    "points/blosc/truncate/0": "read: WRONG",
    "points/blosc/nonutf8_json/0": "query,objects,read: RAISE UnicodeDecodeError",
    "points/blosc/deep_json/0": "query,objects,read: RAISE RecursionError",
    "points/blosc/json_root/0": "open: WRONG",
    "points/blosc/huge_counts/0": "objects: MEMORY",
    "lines/none/bitflip/0": "query,objects,read: WRONG",
    "lines/none/nonutf8_json/0": "query,objects,read: RAISE UnicodeDecodeError",
    "lines/none/deep_json/0": "query,objects,read: RAISE RecursionError",
    "lines/zstd/bitflip/0": "objects,read: WRONG",
    "lines/zstd/delete_cell/0": "read: WRONG",
    "lines/zstd/deep_json/0": "query,objects,read: RAISE RecursionError",
    "lines/zstd/huge_counts/0": "objects: MEMORY",
    "lines/zstd/bomb/0": "query,read: MEMORY",
    "lines/gzip/bitflip/0": "query,read: RAISE BadGzipFile",
    "lines/gzip/truncate/0": "query,objects,read: RAISE EOFError",
    "lines/gzip/zero/0": "query,objects,read: RAISE BadGzipFile",
    "lines/gzip/nonutf8_json/0": "query,objects,read: RAISE UnicodeDecodeError",
    "lines/gzip/deep_json/0": "query,objects,read: RAISE RecursionError",
    "lines/blosc/nonutf8_json/0": "query,objects,read: RAISE UnicodeDecodeError",
    "lines/blosc/deep_json/0": "query,objects,read: RAISE RecursionError",
    "lines/blosc/json_grid/0": "query,read: RAISE ValueError",
    "lines/blosc/bomb/0": "query,objects,read: MEMORY",
    "skeleton/none/delete_cell/0": "objects,read: WRONG",
    "skeleton/none/delete_json/0": "query,read: RAISE AssertionError",
    "skeleton/none/nonutf8_json/0": "query,objects,read: RAISE UnicodeDecodeError",
    "skeleton/none/deep_json/0": "query,objects,read: RAISE RecursionError",
    "skeleton/none/huge_counts/0": "query,objects,read: MEMORY",
    "skeleton/zstd/delete_cell/0": "query,objects,read: WRONG",
    "skeleton/zstd/deep_json/0": "query,objects,read: RAISE RecursionError",
    "skeleton/zstd/json_grid/0": "objects,read: WRONG",
    "skeleton/zstd/bomb/0": "query,objects,read: MEMORY",
    "skeleton/gzip/bitflip/0": "query,objects,read: RAISE BadGzipFile",
    "skeleton/gzip/truncate/0": "query,objects,read: RAISE EOFError",
    "skeleton/gzip/zero/0": "query,objects,read: RAISE BadGzipFile",
    "skeleton/gzip/delete_cell/0": "objects,read: WRONG",
    "skeleton/gzip/delete_json/0": "objects,read: WRONG",
    "skeleton/gzip/deep_json/0": "query,objects,read: RAISE RecursionError",
    "skeleton/gzip/json_dtype/0": "query,objects,read: WRONG",
    "skeleton/blosc/deep_json/0": "query,objects,read: RAISE RecursionError",
    "skeleton/blosc/json_root/0": "open: WRONG",
    "skeleton/blosc/bomb/0": "query,objects,read: MEMORY",
    "graph/none/bitflip/0": "read: WRONG",
    "graph/none/nonutf8_json/0": "query,objects,read: RAISE UnicodeDecodeError",
    "graph/none/deep_json/0": "query,objects,read: RAISE RecursionError",
    "graph/none/json_root/0": "open,query: WRONG",
    "graph/zstd/bitflip/0": "objects,read: WRONG",
    "graph/zstd/deep_json/0": "query,objects,read: RAISE RecursionError",
    "graph/zstd/bomb/0": "query,objects,read: MEMORY",
    "graph/gzip/bitflip/0": "query,objects,read: RAISE BadGzipFile",
    "graph/gzip/truncate/0": "query,read: RAISE EOFError",
    "graph/gzip/delete_json/0": "objects,read: WRONG",
    "graph/gzip/deep_json/0": "query,objects,read: RAISE RecursionError",
    "graph/blosc/truncate/0": "objects,read: WRONG",
    "graph/blosc/delete_json/0": "objects,read: WRONG",
    "graph/blosc/deep_json/0": "query,objects,read: RAISE RecursionError",
    "graph/blosc/huge_counts/0": "query,objects,read: MEMORY",
    "graph/blosc/bomb/0": "query,objects,read: MEMORY",
    "mesh/none/delete_json/0": "query,objects,read: WRONG",
    "mesh/none/nonutf8_json/0": "query,objects,read: RAISE UnicodeDecodeError",
    "mesh/none/deep_json/0": "query,objects,read: RAISE RecursionError",
    "mesh/none/huge_counts/0": "objects: RAISE ValueError",
    "mesh/zstd/delete_cell/0": "objects,read: WRONG",
    "mesh/zstd/deep_json/0": "open: RAISE RecursionError",
    "mesh/zstd/json_root/0": "open: WRONG",
    "mesh/zstd/bomb/0": "query,objects,read: MEMORY",
    "mesh/gzip/bitflip/0": "query,objects,read: RAISE error",
    "mesh/gzip/truncate/0": "query,objects,read: RAISE EOFError",
    "mesh/gzip/delete_cell/0": "objects,read: WRONG",
    "mesh/gzip/delete_json/0": "query,read: WRONG",
    "mesh/gzip/nonutf8_json/0": "query,objects,read: RAISE UnicodeDecodeError",
    "mesh/gzip/deep_json/0": "query,objects,read: RAISE RecursionError",
    "mesh/gzip/huge_counts/0": "query,objects,read: MEMORY",
    "mesh/blosc/delete_cell/0": "query,objects,read: WRONG",
    "mesh/blosc/delete_json/0": "query,objects,read: WRONG",
    "mesh/blosc/nonutf8_json/0": "query,objects,read: RAISE UnicodeDecodeError",
    "mesh/blosc/deep_json/0": "query,objects,read: RAISE RecursionError",
    "mesh/blosc/json_root/0": "open,query: WRONG",
    "mesh/blosc/bomb/0": "query,objects,read: MEMORY",
    "draco/none/delete_cell/0": "query,objects,read: WRONG",
    "draco/none/delete_json/0": "query,objects,read: WRONG",
    "draco/none/nonutf8_json/0": "query,objects,read: RAISE UnicodeDecodeError",
    "draco/none/deep_json/0": "query,objects,read: RAISE RecursionError",
    "draco/none/json_root/0": "open: WRONG",
    "draco/zstd/delete_cell/0": "objects,read: WRONG",
    "draco/zstd/nonutf8_json/0": "query,objects,read: RAISE UnicodeDecodeError",
    "draco/zstd/deep_json/0": "query,objects,read: RAISE RecursionError",
    "draco/zstd/bomb/0": "query,read: MEMORY",
    "draco/gzip/bitflip/0": "query,read: RAISE BadGzipFile",
    "draco/gzip/truncate/0": "query,read: RAISE EOFError",
    "draco/gzip/zero/0": "query,objects,read: RAISE BadGzipFile",
    "draco/gzip/delete_json/0": "query,objects,read: WRONG",
    "draco/gzip/deep_json/0": "query,objects,read: RAISE RecursionError",
    "draco/blosc/delete_cell/0": "query,read: WRONG",
    "draco/blosc/deep_json/0": "query,objects,read: RAISE RecursionError",
    "draco/blosc/json_counts/0": "query,read: WRONG",
    "draco/blosc/bomb/0": "query,read: MEMORY",
    "polygons/none/delete_json/0": "query,objects,read: WRONG",
    "polygons/none/deep_json/0": "query,objects,read: RAISE RecursionError",
    "polygons/none/json_counts/0": "query,objects,read: RAISE ValueError",
    "polygons/none/huge_counts/0": "objects: MEMORY",
    "polygons/zstd/nonutf8_json/0": "query,objects,read: RAISE UnicodeDecodeError",
    "polygons/zstd/json_root/0": "open: WRONG",
    "polygons/zstd/bomb/0": "query,objects,read: MEMORY",
    "polygons/gzip/bitflip/0": "query,read: RAISE BadGzipFile",
    "polygons/gzip/truncate/0": "query,read: RAISE EOFError",
    "polygons/gzip/zero/0": "query,read: RAISE BadGzipFile",
    "polygons/gzip/delete_json/0": "objects,read: WRONG",
    "polygons/gzip/nonutf8_json/0": "open: RAISE UnicodeDecodeError",
    "polygons/gzip/deep_json/0": "query,objects,read: RAISE RecursionError",
    "polygons/blosc/truncate/0": "read: WRONG",
    "polygons/blosc/nonutf8_json/0": "open: RAISE UnicodeDecodeError",
    "polygons/blosc/deep_json/0": "query,objects,read: RAISE RecursionError",
    "polygons/blosc/json_grid/0": "read: WRONG",
    "polygons/blosc/bomb/0": "query,read: MEMORY",
    "points_pyramid/none/delete_json/0": "query,objects,read: WRONG",
    "points_pyramid/none/nonutf8_json/0": "query,objects,read: RAISE UnicodeDecodeError",
    "points_pyramid/none/deep_json/0": "query,objects,read: RAISE RecursionError",
    "points_pyramid/none/json_shape/0": "objects: WRONG",
    "points_pyramid/none/json_root/0": "open: WRONG; query,read: RAISE ValueError",
    "points_pyramid/zstd/deep_json/0": "query,objects,read: RAISE RecursionError",
    "points_pyramid/zstd/json_shape/0": "objects: WRONG",
    "points_pyramid/zstd/json_root/0": "open: WRONG",
    "points_pyramid/zstd/json_counts/0": "query,objects,read: RAISE ValueError",
    "points_pyramid/zstd/bomb/0": "query,objects,read: MEMORY",
    "points_pyramid/gzip/bitflip/0": "query,read: RAISE BadGzipFile",
    "points_pyramid/gzip/truncate/0": "query,objects,read: RAISE EOFError",
    "points_pyramid/gzip/zero/0": "query,read: RAISE BadGzipFile",
    "points_pyramid/gzip/deep_json/0": "query,objects,read: RAISE RecursionError",
    "points_pyramid/gzip/huge_counts/0": "query,objects,read: RAISE IndexError",
    "points_pyramid/blosc/truncate/0": "objects,read: WRONG",
    "points_pyramid/blosc/deep_json/0": "query,objects,read: RAISE RecursionError",
    "points_pyramid/blosc/json_root/0": "open: WRONG; query,read: RAISE ValueError",
    "points_pyramid/blosc/bomb/0": "query,objects,read: MEMORY",
    "lines_pyramid/none/bitflip/0": "query,objects,read: WRONG",
    "lines_pyramid/none/delete_cell/0": "objects: WRONG",
    "lines_pyramid/none/nonutf8_json/0": "query,objects,read: RAISE UnicodeDecodeError",
    "lines_pyramid/none/deep_json/0": "query,objects,read: RAISE RecursionError",
    "lines_pyramid/zstd/bitflip/0": "objects,read: WRONG",
    "lines_pyramid/zstd/delete_cell/0": "read: WRONG",
    "lines_pyramid/zstd/delete_json/0": "read: WRONG",
    "lines_pyramid/zstd/deep_json/0": "query,objects,read: RAISE RecursionError",
    "lines_pyramid/gzip/bitflip/0": "query,objects,read: RAISE error",
    "lines_pyramid/gzip/zero/0": "query,read: RAISE BadGzipFile",
    "lines_pyramid/gzip/delete_json/0": "query,read: WRONG",
    "lines_pyramid/gzip/nonutf8_json/0": "query,objects,read: RAISE UnicodeDecodeError",
    "lines_pyramid/gzip/deep_json/0": "query,objects,read: RAISE RecursionError",
    "lines_pyramid/gzip/json_grid/0": "read: WRONG",
    "lines_pyramid/gzip/json_root/0": "open: WRONG",
    "lines_pyramid/blosc/delete_cell/0": "objects: WRONG",
    "lines_pyramid/blosc/json_root/0": "open: WRONG",
    "lines_pyramid/blosc/bomb/0": "query,read: MEMORY",
}


def _selected(session: pytest.Session) -> list[str]:
    ids = [item.callspec.params.get("case") for item in session.items if hasattr(item, "callspec")]
    return [c for c in ids if c in CASES] or CASES[:1]


@pytest.fixture(scope="session")
def fuzz_results(request: pytest.FixtureRequest) -> Iterator[dict[str, dict[str, Any]]]:
    cases = _selected(request.session)
    work = scratch_dir()
    try:
        used = sorted({parse_case(c)[:2] for c in cases})
        bases: dict[str, str] = {}
        for kind, comp in used:
            bases.update(build(work / "bases", [kind], [comp]))
        yield run(cases, bases, work / "run", workers=2, timeout=20.0).results
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_pristine_stores_read_and_validate(fuzz_results):
    """Every base store reads without an error and validates with no problem."""
    pristine = [c for c in fuzz_results if parse_case(c)[2] == "pristine"]
    assert pristine
    for case in pristine:
        out = classify(case, fuzz_results)
        assert out["validate"] == "report-ok", explain(case, fuzz_results)
        assert all("ok" in fuzz_results[case]["ops"][op] for op in ("open", "query", "objects", "read")), explain(
            case, fuzz_results
        )


def _param(case: str) -> Any:
    if case in KNOWN_FAILING:
        return pytest.param(case, marks=pytest.mark.xfail(strict=True, reason=KNOWN_FAILING[case]))
    return case


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_corrupt_store(case, fuzz_results):
    bad = failures(case, fuzz_results)
    assert not bad, f"{explain(case, fuzz_results)}\nreplay: .venv/bin/python benchmarks/fuzz_stores.py --case {case}"
