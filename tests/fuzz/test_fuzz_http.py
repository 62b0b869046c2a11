"""Seeded fuzz of HTTP answers (issue 28): a hostile server (tests/_hostile_http.py) lies in
one answer; every read gives the library's error or the pristine answer.

Each case serves a plain and a sharded points store from a new server on 127.0.0.1 and makes
the answers for one key lie in one way (truncated bodies, longer bodies, a wrong
``Content-Length``, no ``Content-Length``, garbage instead of HTTP, error statuses, partial
answers nobody asked for, wrong ``Content-Range``, endless bodies, slow answers). The key is
drawn by the seed from the root and level ``zarr.json``, a vertices cell and an attribute cell
of the plain store, and a shard of the sharded store. Operations: ``open`` then a box query,
and ``read()``; outcomes ``same``, ``error`` (a ZarrVectorsError), ``WRONG`` or
``RAISE <type>``. Print the table of outcomes::

    PYTHONPATH=. .venv/bin/python -m tests.fuzz.test_fuzz_http [seeds]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zarr_vectors as zv
from tests._hostile_http import HostileServer, Trick, chunked_endless, endless, garbage, longer, shorter, slow
from zarr_vectors.errors import ZarrVectorsError

SEEDS = 5  # as many as KEYS
BOX = (np.array([50.0, 0.0, 20.0]), np.array([390.0, 260.0, 399.0]))
#: Limits of every case: answers over 1 MiB and requests over 2 s fail.
OPTIONS = {"zv_max_object_bytes": 1 << 20, "zv_timeout": 2}
KEYS = [
    "p.zarr/zarr.json",
    "p.zarr/0/zarr.json",
    "p.zarr/0/vertices/c/1/1/1",
    "p.zarr/0/vertex_attributes/a/c/1/1/1",
    "s.zarr/0/vertices/c/0/0/0",
]


def _raw(status: str, headers: dict[str, str], body: bytes) -> Trick:
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())

    def trick(h: Any, data: bytes) -> None:
        h.wfile.write(f"HTTP/1.1 {status}\r\n{head}\r\n".encode() + body)

    return trick


def _with_data(fn: Callable[[Any, bytes, np.random.Generator], None], seed: int) -> Trick:
    rng = np.random.default_rng(seed)
    return lambda h, data: fn(h, data, rng)


def _cut_no_length(h: Any, data: bytes, rng: np.random.Generator) -> None:
    """No Content-Length, the body cut short, then the connection closes."""
    h.wfile.write(
        b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + data[: int(rng.integers(0, max(1, len(data))))]
    )


def _whole_no_length(h: Any, data: bytes, rng: np.random.Generator) -> None:
    """No Content-Length, the whole body, then the connection closes (a valid answer)."""
    h.wfile.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + data)


def _unasked_partial(h: Any, data: bytes, rng: np.random.Generator) -> None:
    """206 with part of the object, whatever was asked."""
    k = int(rng.integers(0, max(1, len(data))))
    h.wfile.write(
        f"HTTP/1.1 206 P\r\nContent-Length: {k}\r\nContent-Range: bytes 0-{max(k - 1, 0)}/{len(data)}\r\n\r\n".encode()
        + data[:k]
    )


def _wrong_range(h: Any, data: bytes, rng: np.random.Generator) -> None:
    """206 whose Content-Range names bytes shifted from those asked for (the body matches it)."""
    shift = int(rng.integers(1, 16))
    body = data[shift:] if len(data) > shift else data
    end = shift + len(body) - 1
    h.wfile.write(
        f"HTTP/1.1 206 P\r\nContent-Length: {len(body)}\r\nContent-Range: bytes {shift}-{end}/{len(data)}\r\n\r\n".encode()
        + body
    )


def _noise(h: Any, data: bytes, rng: np.random.Generator) -> None:
    h.wfile.write(rng.integers(0, 256, int(rng.integers(1, 4000)), dtype=np.uint8).tobytes())


def _bad_length(h: Any, data: bytes, rng: np.random.Generator) -> None:
    value = ["-1", "abc", "1e3", "99999999999999999999999", " 5", "0x10"][int(rng.integers(0, 6))]
    h.wfile.write(f"HTTP/1.1 200 OK\r\nContent-Length: {value}\r\n\r\n".encode() + data)


def tricks(seed: int) -> dict[str, Trick]:
    """The ways one answer lies, for seed ``seed``."""
    rng = np.random.default_rng(seed)
    return {
        "truncated": shorter(int(rng.integers(1, 5000))),
        "longer": longer(int(rng.integers(1, 5000))),
        "cut-no-length": _with_data(_cut_no_length, seed),
        "whole-no-length": _with_data(_whole_no_length, seed),
        "unasked-partial": _with_data(_unasked_partial, seed),
        "wrong-range": _with_data(_wrong_range, seed),
        "noise": _with_data(_noise, seed),
        "bad-status-line": garbage(b"HTTP/1.1 two hundred\r\n\r\n"),
        "bad-length": _with_data(_bad_length, seed),
        "status-500": _raw("500 Oops", {"Content-Length": "0"}, b""),
        "status-403": _raw("403 No", {"Content-Length": "2"}, b"no"),
        "status-416": _raw("416 Range", {"Content-Length": "0"}, b""),
        "status-204": _raw("204 Nothing", {}, b""),
        "endless": endless,
        "chunked-endless": chunked_endless,
        "slow": slow(0.6),
    }


NAMES = list(tricks(0))
CASES = [f"{t}/{s}" for t in NAMES for s in range(SEEDS)]


def build(folder: Path) -> tuple[Path, dict[str, Any]]:
    rng = np.random.default_rng(2)
    n = 3000
    pos = rng.uniform(0, 399, (n, 3)).astype(np.float32)
    kw: dict[str, Any] = dict(chunk_shape=100, bounds=([0.0] * 3, [399.0] * 3))
    a = rng.random(n).astype(np.float32)
    zv.write_points(folder / "p.zarr", pos, attributes={"a": a}, **kw)
    zv.write_points(folder / "s.zarr", pos, attributes={"a": a}, shards=2, **kw)
    return folder, {s: _answers(zv.open(folder / s)) for s in ("p.zarr", "s.zarr")}


def _rows(res: Any) -> np.ndarray:
    table = np.concatenate(
        [np.asarray(res.positions, np.float64), np.asarray(res.attributes["a"], np.float64).reshape(-1, 1)],
        axis=1,
    )
    return table[np.lexsort(table.T[::-1])]


def _answers(ds: Any) -> dict[str, np.ndarray]:
    return {"query": _rows(ds.query(BOX)), "read": _rows(ds.read())}


def run_case(case: str, folder: Path, pristine: dict[str, Any]) -> dict[str, str]:
    name, seed = case.rsplit("/", 1)
    key = KEYS[(int(seed) + NAMES.index(name)) % len(KEYS)]  # every trick meets every key over the seeds
    store = key.split("/", 1)[0]
    out = {"key": key}
    with HostileServer(folder, {f"/{key}": tricks(int(seed))[name]}) as srv:
        t0 = time.monotonic()
        try:
            ds = zv.open(f"{srv.url}/{store}", storage_options=dict(OPTIONS))
        except ZarrVectorsError:
            return {**out, "open": "error", "query": "n/a", "read": "n/a"}
        except Exception as exc:  # noqa: BLE001 (the fuzz records any other exception as a failure)
            return {**out, "open": f"RAISE {type(exc).__name__}: {exc}"[:200], "query": "n/a", "read": "n/a"}
        out["open"] = "same"
        for op, fn in (("query", lambda: ds.query(BOX)), ("read", ds.read)):
            try:
                got = _rows(fn())
                want = pristine[store][op]
                out[op] = "same" if got.shape == want.shape and np.array_equal(got, want) else "WRONG"
            except ZarrVectorsError:
                out[op] = "error"
            except Exception as exc:  # noqa: BLE001
                out[op] = f"RAISE {type(exc).__name__}: {exc}"[:200]
        out["seconds"] = f"{time.monotonic() - t0:.1f}"
    return out


def failures(out: dict[str, str]) -> list[str]:
    return [f"{op}: {v}" for op, v in out.items() if v.startswith(("WRONG", "RAISE"))]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    return build(tmp_path_factory.mktemp("fuzz-http"))


@pytest.mark.parametrize("case", CASES)
def test_hostile_answer(case, base):
    out = run_case(case, *base)
    assert not failures(out), (case, out)


def main(seeds: int = SEEDS) -> int:
    folder = Path(tempfile.mkdtemp(prefix="fuzz-http-"))
    try:
        root, pristine = build(folder)
        table: Counter[tuple[str, str, str]] = Counter()
        failed = 0
        cases = [f"{t}/{s}" for t in NAMES for s in range(seeds)]
        for case in cases:
            out = run_case(case, root, pristine)
            if failures(out):
                failed += 1
                print("FAILED", case, out)
            for op in ("open", "query", "read"):
                table[(case.rsplit("/", 1)[0], op, out[op].split(":")[0])] += 1
        print(f"{len(cases)} cases, {failed} with a failing outcome")
        for (trick, op, outcome), n in sorted(table.items()):
            print(f"{trick:16} {op:6} {outcome:12} {n}")
        return 1 if failed else 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else SEEDS))
