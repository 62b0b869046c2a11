"""Seeded corruptions of every kind of store (see ``runner.py`` for the outcomes).

Every case copies a base store (kind x compression), applies one mutation with seed 0 and
runs ``open``, a box query, ``objects()``, ``read()`` and ``validate()`` in a child process
under a 1.5 GiB address-space limit and a 20 s timeout. Each operation must give the
library's error or the pristine store's answer, and ``validate()`` a report that is not ok
whenever a reader noticed the damage. The cases run once per session, two children at a
time; ``-k`` selects cases by id. Replay one with its tracebacks::

    .venv/bin/python benchmarks/fuzz_stores.py --case points/zstd/bomb/0

:data:`KNOWN_FAILING` lists cases known to fail (empty: none do); each is a strict xfail,
so a case that starts passing fails the suite until it is taken off the list.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from typing import Any

import pytest

from .child import parse_case
from .mutations import MUTATIONS
from .runner import classify, explain, failures, run, scratch_dir
from .stores import COMPRESSIONS, KINDS, build

SEED = 0
#: Every kind meets every mutation once, under a compression that rotates with both, so each
#: (kind, compression) and each (mutation, compression) pair is covered too (144 cases, about
#: 2 minutes of children). The whole product (864 cases) runs with ``ZV_FUZZ_FULL=1`` and in
#: ``benchmarks/fuzz_stores.py``.
CASES = [
    f"{k}/{c}/{m}/{SEED}"
    for i, k in enumerate(KINDS)
    for j, m in enumerate(MUTATIONS)
    for c in (
        COMPRESSIONS if os.environ.get("ZV_FUZZ_FULL") == "1" else [COMPRESSIONS[(i + j) % len(COMPRESSIONS)]]
    )
]

#: case id -> the failing outcomes seen when it was listed (strict xfails: a fix must remove
#: its entry). Regenerate with ``benchmarks/fuzz_stores.py --seeds 1 --print-known``.
KNOWN_FAILING: dict[str, str] = {}


def _selected(session: pytest.Session) -> list[str]:
    ids = [item.callspec.params.get("case") for item in session.items if hasattr(item, "callspec")]
    return [c for c in ids if c in CASES] or CASES[:1]


def _run_cases(cases: list[str]) -> dict[str, dict[str, Any]]:
    work = scratch_dir()
    try:
        used = sorted({parse_case(c)[:2] for c in cases})
        bases: dict[str, str] = {}
        for kind, comp in used:
            bases.update(build(work / "bases", [kind], [comp]))
        return run(cases, bases, work / "run", workers=2, timeout=20.0).results
    finally:
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="session")
def fuzz_results(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, Any]]:
    """The outcome of every selected case, run once per test run: under pytest-xdist the first
    worker to need them runs the cases and leaves the outcomes in the run's shared temporary
    folder; the others wait on its lock and read them."""
    cases = _selected(request.session)
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run_id is None:
        return _run_cases(cases)
    shared = tmp_path_factory.getbasetemp().parent / f"fuzz-stores-{run_id}.json"
    with open(shared.with_suffix(".lock"), "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if not shared.exists():
            staged = shared.with_suffix(".part")
            staged.write_text(json.dumps(_run_cases(cases)))
            staged.rename(shared)
    results: dict[str, dict[str, Any]] = json.loads(shared.read_text())
    return results


def test_pristine_stores_read_and_validate(fuzz_results):
    """Every base store reads without an error and validates with no problem."""
    pristine = [c for c in fuzz_results if parse_case(c)[2] == "pristine"]
    assert pristine
    for case in pristine:
        out = classify(case, fuzz_results)
        assert out["validate"] == "report-ok", explain(case, fuzz_results)
        assert all("ok" in fuzz_results[case]["ops"][op] for op in ("open", "query", "objects", "read")), (
            explain(case, fuzz_results)
        )


def _param(case: str) -> Any:
    if case in KNOWN_FAILING:
        return pytest.param(case, marks=pytest.mark.xfail(strict=True, reason=KNOWN_FAILING[case]))
    return case


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_corrupt_store(case, fuzz_results):
    bad = failures(case, fuzz_results)
    assert not bad, (
        f"{explain(case, fuzz_results)}\nreplay: .venv/bin/python benchmarks/fuzz_stores.py --case {case}"
    )
