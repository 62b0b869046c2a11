"""Seeded fuzz of shard indexes (issue 28): every mutated index gives the library's error or
the pristine answer, and ``validate()`` reports, never raises, and is not ok when a read failed.

Each case rewrites the index of one shard (of a random sharded array of a points store with
an attribute and object ids) with one mutation, the crc32c recomputed unless the mutation is
the checksum itself, then runs a box query, ``objects()``, ``read()`` and ``validate()`` in
this process. Outcomes per operation: ``same``, ``error`` (a ZarrVectorsError), ``WRONG`` (a
different answer, no error) or ``RAISE <type>``; validate gives ``report-ok``,
``report-problems`` or ``RAISE``. Mutations that leave a valid index with other cells' bytes
in place (swapping two entries) are not here: no index check can see them (``validate``'s
geometry rules do). Print the table of outcomes::

    PYTHONPATH=. .venv/bin/python -m tests.fuzz.test_fuzz_shards [seeds]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from tests.shards._craft import read_index, write_index
from zarr_vectors.errors import ZarrVectorsError
from zarr_vectors.format.shards import EMPTY

SEEDS = 6
N_INNER = 8  # shards of 2 x 2 x 2 cells
BOX = (np.array([50.0, 0.0, 20.0]), np.array([390.0, 260.0, 399.0]))
IDS = [3, 17, 29]

Entries = np.ndarray
#: name -> f(rng, entries (N_INNER, 2) uint64, data length) -> (entries, checksum right)
Mutation = Callable[[np.random.Generator, Entries, int], tuple[Entries, bool]]


def _used(e: Entries, rng: np.random.Generator, k: int = 1) -> list[int]:
    used = np.flatnonzero(e[:, 0] != np.uint64(EMPTY))
    return [int(i) for i in rng.choice(used, size=min(k, len(used)), replace=False)]


def _share(rng, e, n):
    i, j = _used(e, rng, 2)
    e[i] = e[j]
    return e, True


def _overlap(rng, e, n):
    i, j = _used(e, rng, 2)
    e[i, 0] = e[j, 0] + np.uint64(rng.integers(0, max(1, int(e[j, 1]))))
    return e, True


def _grow(rng, e, n):
    (i,) = _used(e, rng)
    e[i, 1] += np.uint64(rng.integers(1, 300))
    return e, True


def _shrink(rng, e, n):
    (i,) = _used(e, rng)
    e[i, 1] = np.uint64(rng.integers(1, max(2, int(e[i, 1]))))
    return e, True


def _past_end(rng, e, n):
    (i,) = _used(e, rng)
    e[i, 0] = np.uint64(n + int(rng.integers(0, 5000)))
    return e, True


def _huge(rng, e, n):
    (i,) = _used(e, rng)
    values = [1 << 40, 1 << 62, (1 << 62) + 1, 1 << 63, EMPTY - 1]
    e[i, int(rng.integers(0, 2))] = np.uint64(values[int(rng.integers(0, len(values)))])
    return e, True


def _half_empty(rng, e, n):
    (i,) = _used(e, rng)
    e[i, int(rng.integers(0, 2))] = np.uint64(EMPTY)
    return e, True


def _garbage(rng, e, n):
    return rng.integers(0, np.iinfo(np.uint64).max, e.shape, dtype=np.uint64, endpoint=True), True


def _small_garbage(rng, e, n):
    """Random ranges inside the data: overlapping, or other cells' bytes cut anywhere."""
    starts = rng.integers(0, max(1, n), N_INNER).astype(np.uint64)
    return np.stack([starts, rng.integers(1, 200, N_INNER).astype(np.uint64)], axis=1), True


def _checksum(rng, e, n):
    (i,) = _used(e, rng)
    e[i, int(rng.integers(0, 2))] ^= np.uint64(1 << int(rng.integers(0, 64)))
    return e, False


MUTATIONS: dict[str, Mutation] = {
    "share": _share,
    "overlap": _overlap,
    "grow": _grow,
    "shrink": _shrink,
    "past-end": _past_end,
    "huge": _huge,
    "half-empty": _half_empty,
    "garbage": _garbage,
    "small-garbage": _small_garbage,
    "checksum": _checksum,
}
CASES = [f"{m}/{s}" for m in MUTATIONS for s in range(SEEDS)]


def build(folder: Path) -> tuple[Path, dict[str, Any]]:
    """The base store and its pristine answers."""
    rng = np.random.default_rng(11)
    n = 4000
    pos = rng.uniform(0, 399, (n, 3)).astype(np.float32)
    path = folder / "base.zarr"
    zv.write_points(
        path,
        pos,
        chunk_shape=100,
        bounds=([0.0] * 3, [399.0] * 3),
        attributes={"a": rng.random(n).astype(np.float32)},
        object_ids=rng.integers(0, 40, n),
        shards=2,
    )
    assert zv.validate(path).ok
    return path, _answers(path)


def _rows(res: Any) -> np.ndarray:
    cols = [np.asarray(res.positions, np.float64)]
    if "a" in (res.attributes or {}):
        cols.append(np.asarray(res.attributes["a"], np.float64).reshape(len(res.positions), -1))
    table = np.concatenate(cols, axis=1) if cols[0].size else np.zeros((0, 4))
    return table[np.lexsort(table.T[::-1])] if len(table) else table


def _answers(path: Path) -> dict[str, Any]:
    ds = zv.open(path)
    return {
        "query": _rows(ds.query(BOX)),
        "objects": _rows(ds.objects(IDS)),
        "read": _rows(ds.read()),
    }


def _op(fn: Callable[[], Any], want: np.ndarray) -> str:
    try:
        got = _rows(fn())
    except ZarrVectorsError:
        return "error"
    except Exception as exc:  # noqa: BLE001 (the fuzz records any other exception as a failure)
        return f"RAISE {type(exc).__name__}: {exc}"[:200]
    return "same" if got.shape == want.shape and np.array_equal(got, want) else "WRONG"


def run_case(case: str, path: Path, pristine: dict[str, Any]) -> dict[str, str]:
    """Mutate one shard of the store at ``path`` as ``case`` says, run the operations, restore it."""
    name, seed = case.rsplit("/", 1)
    rng = np.random.default_rng(int(seed))
    shards = sorted(p for p in path.glob("0/**/c/*/*/*") if p.is_file())
    shard = shards[int(rng.integers(0, len(shards)))]
    original = shard.read_bytes()
    data, entries = read_index(shard, N_INNER)
    try:
        mutated, good_crc = MUTATIONS[name](rng, entries, len(data))
        write_index(shard, data, mutated, checksum=good_crc)
        out = {"shard": str(shard.relative_to(path))}
        out["query"] = _op(lambda: zv.open(path).query(BOX), pristine["query"])
        out["objects"] = _op(lambda: zv.open(path).objects(IDS), pristine["objects"])
        out["read"] = _op(lambda: zv.open(path).read(), pristine["read"])
        try:
            out["validate"] = "report-ok" if zv.validate(path).ok else "report-problems"
        except Exception as exc:  # noqa: BLE001 (validate must not raise for a store it opens)
            out["validate"] = f"RAISE {type(exc).__name__}: {exc}"[:200]
        return out
    finally:
        shard.write_bytes(original)


def failures(out: dict[str, str]) -> list[str]:
    """What is wrong with one case's outcomes (empty: nothing)."""
    bad = [f"{op}: {v}" for op, v in out.items() if op != "shard" and (v.startswith(("WRONG", "RAISE")))]
    read_failed = any(out[op] != "same" for op in ("query", "objects", "read"))
    if read_failed and out["validate"] == "report-ok":
        bad.append("validate: MISSED (ok while a read failed)")
    return bad


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    return build(tmp_path_factory.mktemp("fuzz-shards"))


@pytest.mark.parametrize("case", CASES)
def test_mutated_shard_index(case, base):
    out = run_case(case, *base)
    assert not failures(out), (case, out)


def main(seeds: int = SEEDS) -> int:
    folder = Path(tempfile.mkdtemp(prefix="fuzz-shards-"))
    try:
        path, pristine = build(folder)
        table: Counter[tuple[str, str, str]] = Counter()
        failed = 0
        cases = [f"{m}/{s}" for m in MUTATIONS for s in range(seeds)]
        for case in cases:
            out = run_case(case, path, pristine)
            failed += bool(failures(out))
            for op in ("query", "objects", "read", "validate"):
                table[(case.rsplit("/", 1)[0], op, out[op].split(":")[0])] += 1
        print(f"{len(cases)} cases, {failed} with a failing outcome")
        for (mutation, op, outcome), n in sorted(table.items()):
            print(f"{mutation:14} {op:9} {outcome:16} {n}")
        return 1 if failed else 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else SEEDS))
