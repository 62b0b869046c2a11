"""Seeded mutations of small valid point files (CSV, XYZ, ASCII and binary PLY, LAS, LAZ),
each read and ingested in a child process under a 1.5 GiB address-space limit.

Mutations: ``truncate`` (cut anywhere), ``flip`` (1-4 bits anywhere), ``header`` (bits of the
header), ``count`` (the header's point count, or for text a row of the wrong width, a huge
id, a wide or long line), ``splice`` (random bytes inserted) and ``zero`` (a range zeroed).

Outcomes per operation (upper case = failure):

* ``error``: the library's error (``ZarrVectorsError``) naming the file;
* ``same``: the pristine file's answer; ``read``: another answer, read as the header says
  (LAS/PLY: as many rows as the header's count; a flipped value cannot be noticed, the
  formats have no checksums); ``stored``: ingest wrote as many points as the read gave;
* ``UNNAMED``: a library error without the file's name; ``RAISE <type>``; ``MEMORY``;
  ``TIMEOUT``; ``CRASH``; ``COUNT``: rows other than the header's count; ``WRONG``: ingest
  stored another number of points than the read gave, or wrote what the read refused.

Run the table by hand with more seeds::

    python -m tests.fuzz.test_fuzz_pointfiles --seeds 20
"""

from __future__ import annotations

import json
import os
import random
import resource
import select
import shutil
import struct
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

laspy = pytest.importorskip("laspy")

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("pointfile_child.py")
MEM_LIMIT = 3 << 29
TIMEOUT = 30.0
BASES = ("csv", "xyz", "ply-ascii", "ply-binary", "las", "laz")
MUTATIONS = ("truncate", "flip", "header", "count", "splice", "zero")
SEEDS = 5
N = 300  # points per base file
BIG = [0, 1, N - 1, N + 1, 2 * N, 50_001, 2**31, 2**32 - 1, 2**62, 2**64 - 1]


def make_bases(folder: Path) -> dict[str, Path]:
    """The valid files the cases mutate (seeded, so every run mutates the same bytes)."""
    rng = np.random.default_rng(7)
    xyz = rng.uniform(0, 500, (N, 3)).round(3)
    ids = rng.integers(0, 2**63, N, dtype=np.int64)
    folder.mkdir(parents=True, exist_ok=True)
    out = {"csv": folder / "base.csv", "xyz": folder / "base.xyz"}
    rows = "".join(f"{a},{b},{c},{i},{w}\n" for (a, b, c), i, w in zip(xyz, ids, xyz[:, 0] / 7))
    out["csv"].write_text("x,y,z,segment,w\n" + rows)
    out["xyz"].write_text("".join(f"{a} {b} {c} {i % 256}\n" for (a, b, c), i in zip(xyz, ids)))
    props = ["property double x", "property double y", "property double z", "property int seg"]
    for fmt, key in (("ascii", "ply-ascii"), ("binary_little_endian", "ply-binary")):
        head = "\n".join(["ply", f"format {fmt} 1.0", f"element vertex {N}", *props, "end_header"]) + "\n"
        table = np.zeros(N, [("x", "<f8"), ("y", "<f8"), ("z", "<f8"), ("seg", "<i4")])
        table["x"], table["y"], table["z"], table["seg"] = *xyz.T, ids % 2**31
        body = (
            "".join(f"{r[0]} {r[1]} {r[2]} {r[3]}\n" for r in table.tolist()).encode()
            if fmt == "ascii"
            else table.tobytes()
        )
        out[key] = folder / f"base-{fmt}.ply"
        out[key].write_bytes(head.encode() + body)
    for suffix in ("las", "laz"):
        header = laspy.LasHeader(point_format=6, version="1.4")
        header.scales, header.offsets = np.array([0.001] * 3), np.zeros(3)
        header.add_extra_dim(laspy.ExtraBytesParams(name="segment", type=np.uint64))
        rec = laspy.ScaleAwarePointRecord.zeros(N, header=header)
        rec.x, rec.y, rec.z = xyz.T
        rec["segment"] = ids.astype(np.uint64)
        out[suffix] = folder / f"base.{suffix}"
        with laspy.open(out[suffix], mode="w", header=header) as w:
            w.write_points(rec)
    return out


def _header_end(base: str, data: bytes) -> int:
    if base in ("las", "laz"):
        return 375
    if base.startswith("ply"):
        return data.index(b"end_header") + 11
    return data.index(b"\n") + 1


def _count(base: str, data: bytearray, rng: random.Random) -> bytes:
    value = rng.choice(BIG)
    if base in ("las", "laz"):
        struct.pack_into("<Q", data, 247, value)
        if rng.random() < 0.5:
            struct.pack_into("<I", data, 107, value % 2**32)
        return bytes(data)
    if base.startswith("ply"):
        word = rng.choice([str(value), str(value), "-1", "x", str(2**64), "1e3"])
        return bytes(data).replace(f"element vertex {N}".encode(), f"element vertex {word}".encode(), 1)
    lines = bytes(data).split(b"\n")
    width = len(lines[1].split(b"," if base == "csv" else None))
    sep = "," if base == "csv" else " "
    row = rng.choice(
        [
            sep.join(["1"] * (width + rng.choice([-2, -1, 1, 5000]))),
            sep.join(["1"] * (width - 1) + [rng.choice([str(2**64), str(2**63), str(-(2**63) - 1), "1e400", "nan", "\udcff"])]),
            "1" * (2 << 20),
        ]
    )  # fmt: skip
    lines.insert(rng.randrange(1, len(lines)), row.encode("utf-8", "surrogateescape"))
    return b"\n".join(lines)


def mutate(base: str, data: bytes, mutation: str, seed: int) -> bytes:
    """The bytes of case ``base/mutation/seed``."""
    rng = random.Random(f"{base}/{mutation}/{seed}")
    buf = bytearray(data)
    if mutation == "truncate":
        return bytes(buf[: rng.randrange(len(buf))])
    if mutation in ("flip", "header"):
        top = len(buf) if mutation == "flip" else _header_end(base, data)
        for _ in range(rng.randint(1, 4)):
            buf[rng.randrange(top)] ^= 1 << rng.randrange(8)
        return bytes(buf)
    if mutation == "count":
        return _count(base, buf, rng)
    if mutation == "splice":
        at = rng.randrange(len(buf))
        return bytes(buf[:at]) + rng.randbytes(rng.randint(1, 64)) + bytes(buf[at:])
    at = rng.randrange(len(buf))
    end = min(len(buf), at + rng.randint(1, 256))
    buf[at:end] = bytes(end - at)
    return bytes(buf)


def write_cases(folder: Path, seeds: int) -> dict[str, Path]:
    """Every case's file (the pristine ones first), by case id ``base/mutation/seed``."""
    bases = make_bases(folder / "bases")
    cases = {f"{b}/pristine/0": p for b, p in bases.items()}
    for base, path in bases.items():
        data = path.read_bytes()
        for mutation in MUTATIONS:
            for seed in range(seeds):
                case = f"{base}/{mutation}/{seed}"
                target = folder / f"{case.replace('/', '-')}{path.suffix}"
                target.write_bytes(mutate(base, data, mutation, seed))
                cases[case] = target
    return cases


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEM_LIMIT, MEM_LIMIT))


def run_cases(cases: dict[str, Path], work: Path) -> dict[str, dict[str, Any]]:
    """Each case's answers, from children started afresh after a crash or a hang."""
    results: dict[str, dict[str, Any]] = {}
    pending = list(cases)
    env = dict(os.environ, MALLOC_ARENA_MAX="2", PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    while pending:
        job = {"cases": [[c, str(cases[c])] for c in pending], "mem": MEM_LIMIT}
        with open(work / "stderr.txt", "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, str(CHILD)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=env,
            )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(job).encode())
        proc.stdin.close()
        current, buf, deadline = None, b"", time.monotonic() + TIMEOUT + 60  # +60: the imports
        while True:
            ready, _, _ = select.select([proc.stdout], [], [], 1.0)
            if not ready:
                if time.monotonic() > deadline:
                    proc.kill()
                    results[current or pending[0]] = {"died": "TIMEOUT"}
                    break
                continue
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            if not chunk:
                if current is not None:
                    results[current] = {"died": "CRASH"}
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                msg = json.loads(line)
                if "start" in msg:
                    current, deadline = msg["start"], time.monotonic() + TIMEOUT
                else:
                    results[msg["case"]], current = msg, None
        proc.wait()
        proc.stdout.close()
        pending = [c for c in pending if c not in results]
    return results


def _op_outcome(answer: dict[str, Any], name: str, pristine: dict[str, Any]) -> str:
    if "memory" in answer:
        return "MEMORY"
    if "raise" in answer:
        return f"RAISE {answer['raise']}"
    if "error" in answer:
        return "error" if name in answer["msg"] else "UNNAMED"
    if answer["header"] is not None and answer["rows"] != answer["header"]:
        return "COUNT"
    return "same" if answer["ok"] == pristine.get("ok") else "read"


def classify(case: str, results: dict[str, dict[str, Any]], cases: dict[str, Path]) -> dict[str, str]:
    """Outcome of the case's read and ingest (see the module docstring)."""
    r = results[case]
    if "died" in r:
        return {"read": r["died"], "ingest": r["died"]}
    base = results[f"{case.split('/')[0]}/pristine/0"]["read"]
    read = _op_outcome(r["read"], cases[case].name, base)
    ingest = r["ingest"]
    if "ok" in ingest:
        agrees = "ok" in r["read"] and ingest["rows"] == r["read"]["rows"]
        return {"read": read, "ingest": "stored" if agrees else "WRONG"}
    return {"read": read, "ingest": _op_outcome(ingest, cases[case].name, {})}


def failures(outcomes: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    return {c: o for c, o in outcomes.items() if any(v[:1].isupper() for v in o.values())}


def table(outcomes: dict[str, dict[str, str]]) -> str:
    """Cases per base and outcome (``read/ingest``)."""
    lines = []
    for base in BASES:
        counts = Counter(
            f"{o['read']}/{o['ingest']}" for c, o in outcomes.items() if c.startswith(base + "/")
        )
        lines.append(
            f"{base:<11} {sum(counts.values()):>4}  "
            + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        )
    return "\n".join(lines)


@pytest.fixture(scope="module")
def fuzz_outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    work = tmp_path_factory.mktemp("fuzz-points")
    cases = write_cases(work, SEEDS)
    results = run_cases(cases, work)
    return {c: classify(c, results, cases) for c in cases}


def test_pristine_files_read_and_ingest(fuzz_outcomes):
    for base in BASES:
        assert fuzz_outcomes[f"{base}/pristine/0"] == {"read": "same", "ingest": "stored"}


def test_every_mutation_gives_the_library_error_or_a_consistent_read(fuzz_outcomes):
    assert len(fuzz_outcomes) == len(BASES) * (1 + len(MUTATIONS) * SEEDS)
    assert failures(fuzz_outcomes) == {}, table(fuzz_outcomes)
    seen = Counter(o["read"] for o in fuzz_outcomes.values())
    assert seen["error"] > len(fuzz_outcomes) // 4  # the mutations do reach the checks


def main(argv: list[str] | None = None) -> int:
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description="the point-file fuzz, with a table of outcomes")
    parser.add_argument("--seeds", type=int, default=SEEDS)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="zv-fuzz-points-"))
    try:
        t0 = time.perf_counter()
        cases = write_cases(work, args.seeds)
        results = run_cases(cases, work)
        outcomes = {c: classify(c, results, cases) for c in cases}
        print(f"{len(outcomes)} cases in {time.perf_counter() - t0:.0f} s (read/ingest outcomes)")
        print(table(outcomes))
        for case, o in sorted(failures(outcomes).items()):
            print(f"FAIL {case}: {o} {json.dumps(results[case])[:400]}")
        return 1 if failures(outcomes) else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
