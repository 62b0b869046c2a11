#!/usr/bin/env python
"""Fuzz the reader and the validator with seeded corruptions of small stores; print the outcomes.

Every case copies one base store (a kind x a compression), corrupts it with one seeded
mutation, then runs ``open``, a box query, ``objects()``, ``read()`` and ``validate()`` in a
child process under an address-space limit and a timeout (see ``tests/fuzz/runner.py`` for
the outcomes). The table counts outcomes per kind and mutation; every failing case follows
with its id, so it can be replayed::

    .venv/bin/python benchmarks/fuzz_stores.py                       # 10 seeds: ~5,800 cases
    .venv/bin/python benchmarks/fuzz_stores.py --seeds 2 --kinds points,lines
    .venv/bin/python benchmarks/fuzz_stores.py --case points/zstd/bomb/3   # one case, with tracebacks

The input surfaces besides stores (``where=`` strings, served URLs, shard indexes, HTTP
answers, point files) have seeded fuzz suites of their own in ``tests/fuzz/test_fuzz_*.py``;
``--surfaces`` runs them (each in its own pytest process, printing its table of outcomes)::

    .venv/bin/python benchmarks/fuzz_stores.py --surfaces all
    .venv/bin/python benchmarks/fuzz_stores.py --surfaces where,shards

Exit status 1 when any case failed.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fuzz import runner  # noqa: E402
from fuzz.mutations import MUTATIONS  # noqa: E402
from fuzz.stores import COMPRESSIONS, KINDS, build  # noqa: E402


def _list(text: str | None, allowed: list[str]) -> list[str]:
    if not text:
        return allowed
    names = text.split(",")
    bad = [n for n in names if n not in allowed]
    if bad:
        raise SystemExit(f"unknown {bad}; choose from {allowed}")
    return names


#: The input-surface fuzz suites: ``tests/fuzz/test_fuzz_<name>.py`` (``stores`` is this script's own).
SURFACES = sorted(
    p.stem.removeprefix("test_fuzz_")
    for p in (ROOT / "tests" / "fuzz").glob("test_fuzz_*.py")
    if p.stem != "test_fuzz_stores"
)


def run_surfaces(names: list[str]) -> int:
    """Run each surface's fuzz suite in a pytest process of its own; 1 when any failed."""
    failed = []
    for name in names:
        path = f"tests/fuzz/test_fuzz_{name}.py"
        print(f"== {name}: {path}", flush=True)
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "pytest", "-q", "-s", "-n", "0", "-p", "no:cacheprovider", path]
        done = subprocess.run(cmd, cwd=ROOT, check=False)
        print(
            f"== {name}: {'passed' if done.returncode == 0 else 'FAILED'} in {time.perf_counter() - t0:.0f} s"
        )
        if done.returncode != 0:
            failed.append(name)
    print(f"{len(names)} surfaces, {len(failed)} failed" + (f": {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--surfaces",
        help=f"run these input-surface fuzz suites instead of the store cases: 'all' or some of {','.join(SURFACES)}",
    )
    ap.add_argument(
        "--seeds", type=int, default=10, help="seeds per kind x compression x mutation (default 10)"
    )
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--kinds", help=f"comma-separated subset of {','.join(KINDS)}")
    ap.add_argument("--comps", help=f"comma-separated subset of {','.join(COMPRESSIONS)}")
    ap.add_argument("--mutations", help=f"comma-separated subset of {','.join(MUTATIONS)}")
    ap.add_argument(
        "--exclude",
        action="append",
        default=[],
        help="skip case ids matching this glob (repeatable), e.g. '*/gzip/bomb/*'",
    )
    ap.add_argument("--case", action="append", help="run only this case id (repeatable); prints tracebacks")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per case (default 20)")
    ap.add_argument(
        "--mem-gib", type=float, default=1.5, help="address-space limit per child (default 1.5 GiB)"
    )
    ap.add_argument("--workdir", type=Path, help="keep base stores here (reused when present)")
    ap.add_argument("--findings", type=Path, help="write the failing cases as Markdown to this file")
    ap.add_argument(
        "--print-known",
        action="store_true",
        help="print the failing cases as the KNOWN_FAILING dict of tests/fuzz/test_fuzz_stores.py",
    )
    ap.add_argument("--json-out", type=Path, help="write every case's raw result to this file")
    args = ap.parse_args()

    if args.surfaces:
        return run_surfaces(SURFACES if args.surfaces == "all" else _list(args.surfaces, SURFACES))
    if args.case:
        cases = args.case
    else:
        kinds, comps = _list(args.kinds, list(KINDS)), _list(args.comps, list(COMPRESSIONS))
        muts = _list(args.mutations, list(MUTATIONS))
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        cases = [f"{k}/{c}/{m}/{s}" for k in kinds for c in comps for m in muts for s in seeds]
        cases = [c for c in cases if not any(fnmatch.fnmatchcase(c, pat) for pat in args.exclude)]
    work = args.workdir or runner.scratch_dir()
    t0 = time.perf_counter()
    used = sorted({tuple(c.split("/")[:2]) for c in cases})
    bases = {}
    for kind, comp in used:
        bases.update(build(work / "bases", [kind], [comp]))
    built = time.perf_counter() - t0
    stats = runner.run(
        cases,
        bases,
        work / "run",
        workers=args.workers,
        timeout=args.timeout,
        mem=int(args.mem_gib * (1 << 30)),
    )
    res = stats.results
    failing = [c for c in cases if runner.failures(c, res)]
    print(runner.table(cases, res))
    print()
    print(runner.op_table(cases, res))
    print(
        f"\n{len(cases)} cases ({sum(1 for c in cases if not runner.classify(c, res))} not applicable), "
        f"{stats.children} child processes, {stats.seconds:.0f} s (+{built:.0f} s building {len(bases)} base stores), "
        f"{args.workers} workers"
    )
    print(
        f"worst peak memory of a child: {stats.peak_kib / 1024:.0f} MiB (case {stats.peak_case}); "
        f"limit {args.mem_gib} GiB of address space"
    )
    bad_pristine = [p for p in {runner._pristine(c) for c in cases} if runner.failures(p, res)]
    for p in bad_pristine:
        print("PRISTINE STORE FAILS:", runner.explain(p, res))
    print(f"{len(failing)} failing cases" + (":" if failing else ""))
    for c in failing:
        print(runner.explain(c, res))
        if args.case:
            for op, got in (res[c].get("ops") or {}).items():
                if got.get("tb"):
                    print(f"--- {op} traceback\n{got['tb']}")
    if args.print_known:
        print(known_literal(failing, res))
    if args.findings:
        args.findings.write_text(_markdown(cases, failing, res, stats))
    if args.json_out:
        args.json_out.write_text(json.dumps(res, indent=1))
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failing or bad_pristine else 0


def known_literal(failing: list[str], res: dict) -> str:
    """The KNOWN_FAILING dict of tests/fuzz/test_fuzz_stores.py: case id -> ``ops: outcome; ...``."""
    lines = ["KNOWN_FAILING: dict[str, str] = {"]
    for c in failing:
        by: dict[str, list[str]] = {}
        for op, outcome in runner.failures(c, res).items():
            by.setdefault(outcome, []).append(op)
        summary = "; ".join(f"{','.join(ops)}: {outcome}" for outcome, ops in by.items())
        lines.append(f"    {json.dumps(c)}: {json.dumps(summary)},")
    return "\n".join(lines + ["}"])


def _markdown(cases: list[str], failing: list[str], res: dict, stats: runner.RunStats) -> str:
    lines = [
        "# Fuzz findings",
        "",
        f"{len(cases)} cases, {len(failing)} failing; worst child peak "
        f"{stats.peak_kib / 1024:.0f} MiB ({stats.peak_case}).",
        "",
        "```",
        runner.table(cases, res),
        "```",
        "",
        "| case | operation | outcome | exception at | message |",
        "|---|---|---|---|---|",
    ]
    for c in failing:
        r = res[c]
        for op, outcome in runner.failures(c, res).items():
            got = (r.get("ops") or {}).get(op, {})
            msg = (got.get("msg") or r.get("desc") or "").replace("|", "/").replace("\n", " ")[:140]
            lines.append(f"| `{c}` | {op} | {outcome} | {got.get('where', '')} | {msg} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
