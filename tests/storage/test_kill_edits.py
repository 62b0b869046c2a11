"""Streaming writes and edits of every kind killed with SIGKILL at seeded moments.

The moment is the k-th storage mutation of the run (see ``tests/storage/editkill.py``),
k drawn per seed from the first or second half of the mutations an uninterrupted run
makes on the same backend. After each kill the store answers exactly like the store
before the operation or exactly like the store after it (object ids, every object's
vertices, a box), or, written in place (S3), :func:`zarr_vectors.open` refuses it with
:class:`~zarr_vectors.errors.IncompleteStoreError`; never a mix, never another error.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from tests.storage import editkill as ek
from tests.storage.s3server import DUMMY_AWS_ENV, start_s3_server
from zarr_vectors.errors import IncompleteStoreError

pytestmark = pytest.mark.slow  # writers killed in subprocesses

ROOT = Path(__file__).resolve().parents[2]
CASES = [
    ("skeletons", "stream"),
    ("meshes", "stream"),
    *[(kind, op) for kind in ("skeletons", "meshes", "points") for op in ("append", "replace", "delete")],
]
SEEDS = [0, 1]


def _moment(kind: str, op: str, seed: int, total: int) -> int:
    """A seeded mutation number in the first (seed 0) or second (seed 1) half of ``total``."""
    lo, hi = 1 + seed * total // 2, max(2 + seed * total // 2, 1 + (seed + 1) * total // 2)
    rng = np.random.default_rng([seed, len(kind), len(op)])
    return int(rng.integers(lo, min(hi, total + 1)))


def _states(
    target: str, reference: str, kind: str, op: str, so: dict[str, Any] | None, mp: pytest.MonkeyPatch
) -> tuple[Any, Any, int]:
    """Write the base store at ``target`` and ``reference``, run the operation on the
    reference (counting its mutations): the answers before and after, and the count."""
    kw = {"storage_options": so} if so else {}
    ek.write(target, kind, ek.BASE, 0, **kw)
    ek.write(reference, kind, ek.BASE, 0, **kw)
    before = ek.answers(zv.open(target, **kw))
    with mp.context() as m:
        calls = ek.hook(None, m.setattr)
        ek.run(reference, kind, op, so)
        total = calls[0]
    after = ek.answers(zv.open(reference, **kw))
    assert not ek.same(before, after)
    return before, after, total


def _kill(target: str, kind: str, op: str, die_at: int, so: dict[str, Any] | None, tmp: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "codecs"), env.get("PYTHONPATH", "")])
    env["TMPDIR"] = str(tmp)
    env.update(DUMMY_AWS_ENV)
    args = [target, kind, op, str(die_at)] + ([json.dumps(so)] if so else [])
    proc = subprocess.run(
        [sys.executable, "-m", "tests.storage.editkill", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == -signal.SIGKILL, (die_at, proc.stdout, proc.stderr)


def _check(target: str, so: dict[str, Any] | None, before: Any, after: Any, in_place: bool) -> str:
    kw = {"storage_options": so} if so else {}
    try:
        ds = zv.open(target, **kw)
    except IncompleteStoreError as exc:
        assert in_place, f"a local store is never incomplete: {exc}"
        return "incomplete"
    got = ek.answers(ds)
    if ek.same(got, before):
        return "before"
    assert ek.same(got, after), f"neither the store before nor after: ids {got[0]}"
    return "after"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("kind", "op"), CASES)
def test_local_killed_leaves_before_or_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, op: str, seed: int
) -> None:
    target, reference, tmp = tmp_path / "s.zarr", tmp_path / "ref.zarr", tmp_path / "tmp"
    tmp.mkdir()
    before, after, total = _states(str(target), str(reference), kind, op, None, monkeypatch)
    die_at = _moment(kind, op, seed, total)
    _kill(str(target), kind, op, die_at, None, tmp)
    outcome = _check(str(target), None, before, after, in_place=False)
    if die_at == 1:
        assert outcome == "before"  # killed before it changed anything


@pytest.fixture(scope="module")
def s3_server() -> Iterator[tuple[str, dict[str, Any]]]:
    """A moto S3 server on 127.0.0.1 with one bucket: ``(url_prefix, storage_options)``."""
    with pytest.MonkeyPatch.context() as mp:
        for name, value in DUMMY_AWS_ENV.items():
            mp.setenv(name, value)
        server = start_s3_server("zv-kill-edits")
        try:
            yield server.url_prefix, server.storage_options
        finally:
            server.stop()


@pytest.mark.s3
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("kind", "op"), CASES)
def test_s3_killed_leaves_before_after_or_incomplete(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: tuple[str, dict[str, Any]],
    kind: str,
    op: str,
    seed: int,
) -> None:
    prefix, so = s3_server
    target, reference = f"{prefix}/{kind}-{op}-{seed}.zarr", f"{prefix}/{kind}-{op}-{seed}-ref.zarr"
    before, after, total = _states(target, reference, kind, op, so, monkeypatch)
    die_at = _moment(kind, op, seed, total)
    _kill(target, kind, op, die_at, so, tmp_path)
    outcome = _check(target, so, before, after, in_place=True)
    if die_at == 1:
        assert outcome == "before"
