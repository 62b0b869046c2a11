"""Streaming writes and edits of every kind killed with SIGKILL at seeded moments.

The moment is the k-th storage mutation of the run (see ``tests/storage/editkill.py``): seed 0
draws k before the commit, seed 1 at or after it, among the mutations an uninterrupted run
makes on the same backend. Killed before the commit, the store answers exactly like the store
before the operation (object ids, every object's vertices, a box) or, written in place (S3),
:func:`zarr_vectors.open` refuses it with :class:`~zarr_vectors.errors.IncompleteStoreError`;
killed at or after the commit, it answers exactly like the store after it. Never a mix,
never another error.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from tests.storage import editkill as ek
from tests.storage.s3server import DUMMY_AWS_ENV
from zarr_vectors.errors import IncompleteStoreError

pytestmark = [pytest.mark.slow, pytest.mark.kill]  # writers killed in subprocesses

ROOT = Path(__file__).resolve().parents[2]
CASES = [
    ("skeletons", "stream"),
    ("meshes", "stream"),
    *[(kind, op) for kind in ("skeletons", "meshes", "points") for op in ("append", "replace", "delete")],
]
SEEDS = [0, 1]


def _moment(kind: str, op: str, seed: int, commit: int, total: int) -> int:
    """A seeded mutation number before the commit (seed 0) or from the commit on (seed 1)."""
    lo, hi = (1, commit - 1) if seed == 0 else (commit, total)
    assert lo <= hi, (seed, commit, total)
    rng = np.random.default_rng([seed, len(kind), len(op)])
    return int(rng.integers(lo, hi + 1))


def _chunk(so: dict[str, Any] | None) -> float:
    return 50.0 if so else 25.0


def _states(
    target: str, reference: str, kind: str, op: str, so: dict[str, Any] | None, mp: pytest.MonkeyPatch
) -> tuple[Any, Any, list[str]]:
    """Write the base store at ``target`` and ``reference``, run the operation on the
    reference (labelling its mutations): the answers before and after, and the labels."""
    kw = {"storage_options": so} if so else {}
    chunk = _chunk(so)
    ek.write(target, kind, ek.BASE, 0, chunk, **kw)
    ek.write(reference, kind, ek.BASE, 0, chunk, **kw)
    before = ek.answers(zv.open(target, **kw))
    with mp.context() as m:
        labels = ek.hook(None, m.setattr)
        ek.run(reference, kind, op, so, chunk)
    after = ek.answers(zv.open(reference, **kw))
    assert not ek.same(before, after)
    return before, after, list(labels)


def _kill(target: str, kind: str, op: str, die_after: int, so: dict[str, Any] | None, tmp: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "codecs"), env.get("PYTHONPATH", "")])
    env["TMPDIR"] = str(tmp)
    env.update(DUMMY_AWS_ENV)
    args = [target, kind, op, str(die_after), str(_chunk(so))] + ([json.dumps(so)] if so else [])
    proc = subprocess.run(
        [sys.executable, "-m", "tests.storage.editkill", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == -signal.SIGKILL, (die_after, proc.stdout, proc.stderr)


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
    before, after, labels = _states(str(target), str(reference), kind, op, None, monkeypatch)
    commit = ek.commit_moment(labels, in_place=False)
    die_after = _moment(kind, op, seed, commit, len(labels))
    _kill(str(target), kind, op, die_after, None, tmp)
    outcome = _check(str(target), None, before, after, in_place=False)
    assert outcome == ("after" if die_after >= commit else "before"), (die_after, commit, labels)


#: In place, every kind and operation commits through the same code (``commit_in_place``); at
#: 10 to 20 s a case against moto, four cases cover each kind and each operation once.
S3_CASES = [("skeletons", "stream"), ("meshes", "append"), ("points", "replace"), ("skeletons", "delete")]


@pytest.mark.s3
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("kind", "op"), S3_CASES)
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
    before, after, labels = _states(target, reference, kind, op, so, monkeypatch)
    commit = ek.commit_moment(labels, in_place=True)
    die_after = _moment(kind, op, seed, commit, len(labels))
    _kill(target, kind, op, die_after, so, tmp_path)
    outcome = _check(target, so, before, after, in_place=True)
    if die_after >= commit:
        assert outcome == "after", (die_after, commit, labels)
    else:
        assert outcome in ("before", "incomplete"), (die_after, commit, labels)
