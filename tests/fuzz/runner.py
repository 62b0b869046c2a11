"""The parent side of the fuzzer: run cases in child processes, classify each operation.

:func:`run` hands the cases out to ``workers`` child processes (:mod:`fuzz.child`), each
under an address-space limit, and watches their output: a case that prints nothing for
``timeout`` seconds is a hang (the child is killed), a child that dies mid-case is a crash;
either way a new child takes the remaining cases. :func:`classify` compares each operation
with the pristine store's answer.

Outcomes per operation (upper case = failure):

* ``same``: the answer equals the pristine store's; ``error``: a library error
  (``ZarrVectorsError``, or a documented ``KeyError``); ``n/a``: open failed first, or an
  operation before it died; ``lost``: finished, but the child died later in the case;
  ``report-ok`` / ``report-problems``: what ``validate()`` returned; ``unchecked``: a
  different answer after a bit flip in a store written without checksums (only the crc32c
  codec of ``checksums=True`` can reveal a changed value; in ``-crc`` stores it is ``WRONG``);
* ``WRONG``: a different answer without an error; ``RAISE <type>``: any other exception;
  ``MEMORY``: MemoryError under the limit; ``TIMEOUT``; ``CRASH <signal>``;
  ``MISSED``: validate() says ok while a read raised or gave a ``WRONG`` answer.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .child import OPS, parse_case

CHILD = Path(__file__).with_name("child.py")
MEM_LIMIT = 3 << 29  # 1.5 GiB of address space per child
RECYCLE_KIB = 512 << 10  # a case that peaked past 512 MiB gets the rest a fresh child
READS = ("open", "query", "objects", "read")


@dataclass
class RunStats:
    cases: int = 0
    children: int = 0
    seconds: float = 0.0
    peak_kib: int = 0
    peak_case: str = ""
    results: dict[str, dict[str, Any]] = field(default_factory=dict)


def _lines(proc: subprocess.Popen[bytes], timeout: float) -> Any:
    """Yield parsed stdout lines; yields None when ``timeout`` passes without a whole line."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    buf = b""
    while True:
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield json.loads(line)
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            yield None
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return
        buf += chunk


def _worker(
    cases: list[str], job: dict[str, Any], timeout: float, stats: RunStats, lock: threading.Lock
) -> None:
    pending = list(cases)
    env = dict(os.environ, MALLOC_ARENA_MAX="2", PYTHONHASHSEED="0")
    while pending:
        err = Path(job["work"]) / f"stderr-{threading.get_ident()}.txt"
        with err.open("wb") as errf:
            proc = subprocess.Popen(
                [sys.executable, str(CHILD)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errf,
                env=env,
            )
        with lock:
            stats.children += 1
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({**job, "cases": pending}).encode())
        proc.stdin.close()
        current, op, done, deadline = None, None, 0, time.monotonic() + timeout + 30  # +30: interpreter start
        killed = None
        for msg in _lines(proc, 1.0):
            if msg is None:
                if time.monotonic() > deadline:
                    proc.kill()
                    killed = "TIMEOUT"
                    break
                continue
            if "start" in msg:
                current, op, deadline = msg["start"], None, time.monotonic() + timeout
            elif "op" in msg:
                op = msg["op"]
            elif "case" in msg:
                with lock:
                    stats.results[msg["case"]] = msg
                    if msg["rss_kib"] > stats.peak_kib:
                        stats.peak_kib, stats.peak_case = msg["rss_kib"], msg["case"]
                current, op, done = None, None, done + 1
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        if current is not None:
            what = killed or _death(proc.returncode)
            tail = err.read_text(errors="replace")[-2000:] if err.exists() else ""
            with lock:
                stats.results[current] = {"case": current, "died": what, "op": op, "stderr": tail}
            done += 1
        elif done == 0:
            raise RuntimeError(
                f"fuzz child exited with {proc.returncode} before its first case:\n"
                f"{err.read_text(errors='replace')[-3000:]}"
            )
        pending = pending[done:]


def scratch_dir() -> Path:
    """A new private folder, in memory (``/dev/shm``) when the system has one: every case
    copies a store, which costs ten times more on disk."""
    shm = Path("/dev/shm")
    use = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="zv-fuzz-", dir=use))


def _death(code: int) -> str:
    if code < 0:
        try:
            return f"CRASH {signal.Signals(-code).name}"
        except ValueError:
            return f"CRASH signal {-code}"
    return f"CRASH exit {code}"


def run(
    cases: list[str],
    bases: dict[str, str],
    work: Path,
    *,
    workers: int = 2,
    timeout: float = 20.0,
    mem: int = MEM_LIMIT,
) -> RunStats:
    """Run ``cases`` (plus the pristine case of every base they use) in child processes."""
    work.mkdir(parents=True, exist_ok=True)
    pristine = sorted({"/".join(parse_case(c)[:2]) + "/pristine/0" for c in cases})
    todo = pristine + [c for c in cases if c not in pristine]
    job = {"bases": bases, "work": str(work), "mem": mem, "recycle_kib": RECYCLE_KIB}
    stats = RunStats(cases=len(todo))
    lock = threading.Lock()
    t0 = time.perf_counter()
    threads = [
        threading.Thread(target=_worker, args=(todo[i::workers], job, timeout, stats, lock))
        for i in range(workers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats.seconds = time.perf_counter() - t0
    stats.peak_kib = max(stats.peak_kib, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    missing = [c for c in todo if c not in stats.results]
    if missing:
        raise RuntimeError(f"{len(missing)} fuzz cases produced no result, e.g. {missing[:3]}")
    return stats


def _pristine(case: str) -> str:
    kind, comp, _, _ = parse_case(case)
    return f"{kind}/{comp}/pristine/0"


def _changed(case: str) -> str:
    """A different answer: ``unchecked`` for a flipped bit in a store written without
    checksums (nothing in the format can reveal a changed value; ``checksums=True`` does),
    else ``WRONG``."""
    _, comp, mutation, _ = parse_case(case)
    return "unchecked" if mutation == "bitflip" and not comp.endswith("-crc") else "WRONG"


def classify(case: str, results: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Outcome of each operation of ``case`` (see the module docstring); {} when not applicable."""
    r = results[case]
    if "na" in r:
        return {}
    base = results[_pristine(case)]
    out: dict[str, str] = {}
    if "died" in r:  # ops before the one that died finished, but their answers were lost
        at = OPS.index(r["op"] or "open")
        return {op: "lost" if k < at else r["died"] if k == at else "n/a" for k, op in enumerate(OPS)}
    for op in OPS:
        got, want = r["ops"][op], base["ops"][op]
        if "skip" in got:
            out[op] = "n/a"
        elif "ok" in got:
            if op == "validate":
                out[op] = "report-ok" if got["ok"] == "ok" else "report-problems"
            else:
                out[op] = "same" if got["ok"] == want.get("ok") else _changed(case)
        elif got["lib"]:
            out[op] = "same" if got.get("exc") == want.get("exc") and "exc" in want else "error"
        else:
            out[op] = "MEMORY" if got["exc"] == "MemoryError" else f"RAISE {got['exc']}"
    # The validator missed something a reader noticed (an error), or a change a reader let
    # through that the store's bytes reveal (a bit flip in a payload only a checksum reveals).
    mutation = parse_case(case)[2]
    noticed = any(out[op] == "error" or out[op] == "WRONG" for op in READS)
    if out["validate"] == "report-ok" and noticed and mutation != "pristine":
        out["validate"] = "MISSED"
    return out


def failures(case: str, results: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {op: o for op, o in classify(case, results).items() if o[:1].isupper()}


def explain(case: str, results: dict[str, dict[str, Any]]) -> str:
    """A few lines on one case: what was changed and each failing operation."""
    r = results[case]
    lines = [f"{case}: {r.get('desc') or r.get('na') or ''}"]
    for op, outcome in classify(case, results).items():
        got = (r.get("ops") or {}).get(op, {})
        detail = ""
        if "exc" in got:
            detail = f" {got['exc']} at {got['where']}: {got['msg'][:160]}"
        elif outcome == "MISSED":
            detail = " (validate found nothing)"
        elif "died" in r and op == r.get("op"):
            detail = f" {r['stderr'][-300:]!r}"
        lines.append(f"  {op:9s} {outcome}{detail}")
    return "\n".join(lines)


def table(cases: list[str], results: dict[str, dict[str, Any]]) -> str:
    """Counts of operation outcomes per kind and mutation (over compressions, seeds, operations)."""
    rows: dict[tuple[str, str], Counter[str]] = {}
    for case in cases:
        kind, _, mutation, _ = parse_case(case)
        c = rows.setdefault((kind, mutation), Counter())
        out = classify(case, results)
        c["cases"] += 1
        if not out:
            c["n/a case"] += 1
        for o in out.values():
            c[o.split(" ")[0] if o[:1].isupper() else o] += 1
    cols = [
        "cases",
        "same",
        "error",
        "n/a",
        "report-ok",
        "report-problems",
        "unchecked",
        "WRONG",
        "RAISE",
        "MEMORY",
        "TIMEOUT",
        "CRASH",
        "MISSED",
    ]
    head = f"{'kind':15s} {'mutation':13s}" + "".join(f"{c[:9]:>10s}" for c in cols)
    lines = [head, "-" * len(head)]
    total: Counter[str] = Counter()
    for (kind, mutation), c in sorted(rows.items()):
        total += c
        lines.append(f"{kind:15s} {mutation:13s}" + "".join(f"{c.get(k, 0):>10d}" for k in cols))
    lines.append("-" * len(head))
    lines.append(f"{'total':29s}" + "".join(f"{total.get(k, 0):>10d}" for k in cols))
    return "\n".join(lines)


def op_table(cases: list[str], results: dict[str, dict[str, Any]]) -> str:
    """Counts of outcomes per operation, over every case."""
    rows: dict[str, Counter[str]] = {op: Counter() for op in OPS}
    for case in cases:
        for op, o in classify(case, results).items():
            rows[op][o.split(" ")[0] if o[:1].isupper() else o] += 1
    cols = sorted({k for c in rows.values() for k in c}, key=lambda k: (k[:1].isupper(), k))
    lines = [f"{'operation':10s}" + "".join(f"{c[:15]:>16s}" for c in cols)]
    lines += [f"{op:10s}" + "".join(f"{rows[op].get(c, 0):>16d}" for c in cols) for op in OPS]
    return "\n".join(lines)
