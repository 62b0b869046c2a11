"""Race two writers on one local store, in two processes, many times; print what each race left.

Usage: ``python benchmarks/race_writers.py [--trials 200] [--pairs append+append,...]``

Each trial copies a small point cloud (2,000 points; pairs with ``build_pyramid`` start
from a store with a pyramid), then two long-lived worker processes each get one write:
``append`` (500 points of their own attribute value), ``build_pyramid`` (one level, over the
old one), ``reshard`` (the store into itself, sharded) or ``overwrite`` (``write_points(...,
overwrite=True)`` of 1,500 new points). Workers open the store before a common go (so both
often start from the same version) or, in every other trial, after it with a random delay up
to 60 ms, and write with ``wait`` 0 or 2 s (every other pair of trials).

Afterwards the store must read back as one of the valid histories of the calls that
returned normally (in either order; a call that raised ``StoreConflictError`` applied
nothing): its level-0 rows (positions and attribute, sorted) and a box query equal a numpy
brute force of that history, its pyramid is absent, fresh or stale as that history says, and
``validate`` finds no problem. Outcomes per trial: both calls landed, one raised
``StoreConflictError``, a *lost update* (the store matches a history lacking a call that
returned normally), *unreadable* (reading or ``validate`` failed), *other* (anything else:
a call raised another error, or the store matches no history).

The test ``tests/storage/test_writer_races.py`` runs a few trials of every pair with this module.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing as mp
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

PAIRS = [
    ("append", "append"),
    ("append", "build_pyramid"),
    ("append", "reshard"),
    ("build_pyramid", "build_pyramid"),
    ("overwrite", "append"),
]
BOUNDS = ([0.0, 0.0, 0.0], [100.0, 100.0, 100.0])
BOX = ([10.0, 20.0, 0.0], [70.0, 90.0, 60.0])


def points(seed: int, n: int, value: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` positions (float32, inside BOUNDS) and an int32 attribute all equal to ``value``."""
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 100, (n, 3)).astype(np.float32), np.full(n, value, np.int32)


def base_store(path: Path, pyramid: bool) -> None:
    """The store every trial starts from (a copy of it): 2,000 points of value 0."""
    import zarr_vectors as zv

    pos, v = points(0, 2000, 0)
    zv.write_points(path, pos, attributes={"v": v}, chunk_shape=25, bounds=BOUNDS, overwrite=True)
    if pyramid:
        zv.open(path, "r+").build_pyramid([2])


def batch(op: str, trial: int, slot: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The rows ``op`` brings (appends: their own value 1 or 2; overwrite: value 9), or None."""
    if op == "append":
        return points(10_000 + 2 * trial + slot, 500, 1 + slot)
    if op == "overwrite":
        return points(50_000 + trial, 1500, 9)
    return None


# -- the worker processes ---------------------------------------------------------------
def _write(op: str, path: Path, ds: Any, trial: int, slot: int, wait: float) -> None:
    import zarr_vectors as zv

    rows = batch(op, trial, slot)
    if op == "append":
        assert rows is not None
        ds.append(rows[0], attributes={"v": rows[1]})
    elif op == "build_pyramid":
        ds.build_pyramid([2], overwrite=True)
    elif op == "reshard":
        zv.reshard(
            path, path, shards=2, overwrite=True, progress=False, dst_storage_options={"zv_wait": wait}
        )
    else:
        assert rows is not None
        zv.write_points(
            path,
            rows[0],
            attributes={"v": rows[1]},
            chunk_shape=25,
            bounds=BOUNDS,
            overwrite=True,
            storage_options={"zv_wait": wait},
        )


def worker(conn: Connection) -> None:
    """Serve trials: ``(op, path, trial, slot, early, delay, wait)``, then "go"; answer the outcome."""
    import zarr_vectors as zv
    from zarr_vectors.errors import StoreConflictError

    while True:
        job = conn.recv()
        if job is None:
            return
        op, path, trial, slot, early, delay, wait = job
        path = Path(path)
        ds = None
        if early and op in ("append", "build_pyramid"):
            ds = zv.open(path, "r+", wait=wait)
        conn.send("ready")
        conn.recv()  # go
        try:
            time.sleep(delay)
            if ds is None and op in ("append", "build_pyramid"):
                ds = zv.open(path, "r+", wait=wait)
            _write(op, path, ds, trial, slot, wait)
            conn.send("landed")
        except StoreConflictError as exc:
            conn.send(("conflict", str(exc)))
        except Exception as exc:  # reported, not hidden: any other outcome counts as "other"
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


# -- the valid histories -------------------------------------------------------------------
@dataclass(frozen=True)
class State:
    """What a history leaves: level-0 rows (positions and value, sorted) and the pyramid."""

    rows: bytes
    pyramid: str  # "none", "fresh" or "stale"


def _sorted_rows(pos: np.ndarray, v: np.ndarray) -> np.ndarray:
    table = np.column_stack([pos.astype(np.float64), v.astype(np.float64)])
    return table[np.lexsort(table.T[::-1])] if len(table) else table.reshape(0, 4)


@dataclass
class Model:
    pos: np.ndarray
    v: np.ndarray
    pyramid: str

    def apply(self, op: str, trial: int, slot: int) -> Model:
        rows = batch(op, trial, slot)
        if op == "append":
            assert rows is not None
            # an append brings the levels up to date in its own commit (pyramid="update", the default)
            return Model(np.concatenate([self.pos, rows[0]]), np.concatenate([self.v, rows[1]]), self.pyramid)
        if op == "build_pyramid":
            return Model(self.pos, self.v, "fresh")
        if op == "overwrite":
            assert rows is not None
            return Model(rows[0], rows[1], "none")
        return self  # reshard copies everything

    def state(self) -> State:
        return State(_sorted_rows(self.pos, self.v).tobytes(), self.pyramid)


def histories(ops: tuple[str, str], landed: list[bool], trial: int, pyramid: bool) -> dict[State, set[int]]:
    """Every state a history of landed calls can leave, with the calls it applied; histories
    of a subset of the landed calls too (those are lost updates)."""
    pos, v = points(0, 2000, 0)
    start = Model(pos, v, "fresh" if pyramid else "none")
    out: dict[State, set[int]] = {}
    slots = [i for i in range(2) if landed[i]]
    for k in range(len(slots) + 1):
        for order in itertools.permutations(slots, k):
            model = start
            for slot in order:
                model = model.apply(ops[slot], trial, slot)
            applied = out.setdefault(model.state(), set())
            if len(order) > len(applied):
                out[model.state()] = set(order)
    return out


def observe(path: Path) -> tuple[State | None, str]:
    """The store's state, and the box query checked against its level-0 rows; None when
    reading or ``validate`` fails (the reason as text)."""
    import warnings

    import zarr_vectors as zv
    from zarr_vectors.errors import ZarrVectorsError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = zv.validate(path)
            if not report.ok:
                return None, f"validate: {[p.rule for p in report.problems][:3]}"
            ds = zv.open(path)
            res = ds.read(attributes=["v"])
            pos, v = np.asarray(res.positions), np.asarray(res.attributes["v"])
            box = ds.query(bbox=BOX, attributes=["v"])
            inside = np.all((pos >= BOX[0]) & (pos < BOX[1]), axis=1)
            got = _sorted_rows(np.asarray(box.positions), np.asarray(box.attributes["v"]))
            if not np.array_equal(got, _sorted_rows(pos[inside], v[inside])):
                return None, "box query differs from the brute force over read()"
            pyramid = "none" if ds.levels == [0] else ("stale" if ds.stale_levels() else "fresh")
    except (ZarrVectorsError, OSError) as exc:
        return None, f"{type(exc).__name__}: {exc}"
    return State(_sorted_rows(pos, v).tobytes(), pyramid), ""


# -- the trials --------------------------------------------------------------------------
@dataclass
class Tally:
    trials: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)


def run_pair(ops: tuple[str, str], trials: int, folder: Path, conns: list[Connection], seed: int) -> Tally:
    rng = random.Random(seed)
    pyramid = "build_pyramid" in ops
    tally = Tally()
    base = folder / f"base-{ops[0]}-{ops[1]}.zarr"
    base_store(base, pyramid)
    for trial in range(trials):
        path = folder / f"race-{ops[0]}-{ops[1]}-{trial}.zarr"
        shutil.copytree(base, path)
        early = trial % 2 == 0
        wait = 2.0 if trial % 4 >= 2 else 0.0
        for slot, conn in enumerate(conns):
            delay = 0.0 if early else rng.uniform(0, 0.06)
            conn.send((ops[slot], str(path), trial, slot, early, delay, wait))
        for conn in conns:
            assert _recv(conn) == "ready"
        for conn in conns:
            conn.send("go")
        answers = [_recv(conn) for conn in conns]
        tally.trials += 1
        tally.outcomes[classify(ops, answers, path, trial, pyramid, tally.notes)] += 1
        _remove(path)
    return tally


def _recv(conn: Connection, seconds: float = 300.0) -> Any:
    """A worker's answer; RuntimeError when none comes (a worker died or hangs)."""
    if not conn.poll(seconds):
        raise RuntimeError(f"no answer from a race worker in {seconds:g} s")
    return conn.recv()


def classify(
    ops: tuple[str, str], answers: list[Any], path: Path, trial: int, pyramid: bool, notes: list[str]
) -> str:
    landed = [a == "landed" for a in answers]
    errors = [a[1] for a in answers if isinstance(a, tuple) and a[0] == "error"]
    if errors:
        notes.append(f"trial {trial}: {errors[0]}")
        return "other"
    state, why = observe(path)
    if state is None:
        notes.append(f"trial {trial}: unreadable: {why}")
        return "unreadable"
    applied = histories(ops, landed, trial, pyramid).get(state)
    if applied is None:
        notes.append(f"trial {trial}: the store matches no history of {answers}")
        return "other"
    if len(applied) < sum(landed):
        notes.append(f"trial {trial}: lost update ({answers})")
        return "lost update"
    return "landed both" if all(landed) else ("one conflict" if any(landed) else "both conflict")


def _remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def run(pairs: list[tuple[str, str]], trials: int, seed: int = 0) -> dict[tuple[str, str], Tally]:
    """Run ``trials`` races of each pair with two worker processes; the tally of each pair."""
    ctx = mp.get_context("spawn")
    ends = [ctx.Pipe() for _ in range(2)]
    procs = [ctx.Process(target=worker, args=(child,), daemon=True) for _, child in ends]
    for p in procs:
        p.start()
    conns = [parent for parent, _ in ends]
    out = {}
    try:
        with tempfile.TemporaryDirectory(prefix="zv-race-") as folder:
            for i, ops in enumerate(pairs):
                out[ops] = run_pair(ops, trials, Path(folder), conns, seed + i)
    finally:
        for conn in conns:
            conn.send(None)
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
    return out


COLUMNS = ["landed both", "one conflict", "both conflict", "lost update", "unreadable", "other"]


def table(results: dict[tuple[str, str], Tally]) -> str:
    head = f"{'pair':<30}{'trials':>7}" + "".join(f"{c:>15}" for c in COLUMNS)
    lines = [head, "-" * len(head)]
    for ops, t in results.items():
        lines.append(f"{'+'.join(ops):<30}{t.trials:>7}" + "".join(f"{t.outcomes[c]:>15}" for c in COLUMNS))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200, help="races per pair (default 200)")
    parser.add_argument("--pairs", default=",".join("+".join(p) for p in PAIRS), help="comma-separated a+b")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    pairs = [tuple(p.split("+")) for p in args.pairs.split(",")]
    start = time.perf_counter()
    results = run([(a, b) for a, b in pairs], args.trials, args.seed)
    print(table(results))
    for ops, t in results.items():
        for note in t.notes[:5]:
            print(f"  {'+'.join(ops)}: {note}")
    print(
        f"{sum(t.trials for t in results.values())} races in {time.perf_counter() - start:.0f} s (pid {os.getpid()})"
    )
    bad = sum(t.outcomes[c] for t in results.values() for c in ("lost update", "unreadable", "other"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
