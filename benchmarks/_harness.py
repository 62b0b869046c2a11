"""Code the benchmark scripts share: child processes, the reference venv, timing and tables.

Scripts run as ``python benchmarks/bench_x.py`` find this module with ``import _harness``.
Children started with ``-I`` (isolated, so they import only the ``zarr_vectors`` of their own
interpreter) do not get the benchmarks folder on ``sys.path`` and add it themselves. It
imports only the standard library, so the reference venv's python can import it too.
"""

from __future__ import annotations

import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
REFERENCE_VERSION = "0.9.2"
DEFAULT_REF_VENV = REPO / ".cache" / "reference-venv"
REF_VENV_SCRIPT = REPO.parent / "shared" / "tools" / "reference-venv.sh"


def make_log(name: str | None = None) -> Callable[[str], None]:
    """A function writing one line to stderr, prefixed ``[name]`` when a name is given."""
    prefix = f"[{name}] " if name else ""

    def log(msg: str) -> None:
        sys.stderr.write(f"{prefix}{msg}\n")
        sys.stderr.flush()

    return log


# --------------------------------------------------------------------------- child processes


class ChildError(RuntimeError):
    """A child process failed, ran out of time, or printed no JSON answer."""

    def __init__(self, msg: str, *, stderr: str = "", timed_out: bool = False) -> None:
        super().__init__(msg)
        self.stderr = stderr
        self.timed_out = timed_out


def child_env(**extra: str) -> dict[str, str]:
    """This environment without ``PYTHON*`` variables (plus ``extra``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(extra)
    return env


def run_json(
    cmd: list[str],
    *,
    what: str,
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    tail: int = 8,
) -> tuple[dict[str, Any], str]:
    """Run ``cmd``; return (the JSON object on its last stdout line, its stderr).

    Raises ChildError naming ``what`` with the last ``tail`` stderr lines when the child
    exits non-zero, runs over ``timeout`` seconds or prints no JSON. ``env`` defaults to
    ``child_env()``.
    """
    try:
        proc = subprocess.run(
            cmd,
            cwd=cwd,
            env=child_env() if env is None else env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        raise ChildError(f"{what}: over {timeout:g} s", timed_out=True) from exc
    if proc.returncode != 0:
        last = "\n".join(proc.stderr.strip().splitlines()[-tail:])
        raise ChildError(f"{what} exited {proc.returncode}: {last}", stderr=proc.stderr)
    lines = [ln for ln in proc.stdout.strip().splitlines() if ln.strip()]
    try:
        return json.loads(lines[-1]), proc.stderr
    except (IndexError, json.JSONDecodeError) as exc:
        msg = f"{what}: no JSON result ({exc}); stdout tail: {lines[-3:]}"
        raise ChildError(msg, stderr=proc.stderr) from exc


def run_job(
    python: str,
    script: str | Path,
    job: dict[str, Any],
    *,
    isolated: bool = True,
    **kw: Any,
) -> tuple[dict[str, Any], str]:
    """Run ``script --child JOB_JSON`` (the script's own child mode) with ``run_json``.

    ``isolated`` runs it with ``-E -s``: like ``-I``, but the script's folder stays on
    ``sys.path`` so the child can ``import _harness``.
    """
    cmd = [python, *(["-E", "-s"] if isolated else []), str(script), "--child", json.dumps(job)]
    kw.setdefault("what", f"child {job.get('task')}")
    return run_json(cmd, **kw)


class TaskChild:
    """A ``_*_child.py`` script taking ``--impl I --task T --key value ...``; a fresh process a call.

    ``snapshot`` copies our packages once so every child of a run imports the same code, even
    when others commit while a long benchmark runs.
    """

    def __init__(self, script: Path, timeout: float = 1800) -> None:
        self.script = script
        self.timeout = timeout
        self.ours_source: str | None = None

    def snapshot(self, work: str, packages: dict[str, Path]) -> None:
        dest = os.path.join(work, "ours-src")
        for name, src in packages.items():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            shutil.copytree(src, os.path.join(dest, name), ignore=ignore)
        self.ours_source = dest

    def run(self, python: str, impl: str, task: str, *, cwd: str, **kw: Any) -> dict[str, Any]:
        cmd = [python, "-I", str(self.script), "--impl", impl, "--task", task]
        if impl == "ours" and self.ours_source:
            cmd += ["--ours-source", self.ours_source]
        for key, value in kw.items():
            if value is not None:
                cmd += [f"--{key.replace('_', '-')}", str(value)]
        return run_json(cmd, what=f"{impl} {task}", cwd=cwd, timeout=self.timeout)[0]


def describe_source(snapshot: bool, paths: Iterable[str] = ("zarr_vectors",)) -> dict[str, Any]:
    """Our commit and the uncommitted files under ``paths`` (recorded with the results)."""
    return {
        "commit": git_commit(),
        "snapshot": snapshot,
        "uncommitted_package_files": uncommitted(*paths),
    }


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def git_commit() -> str | None:
    """The short commit of this checkout, or None."""
    return (_git("rev-parse", "--short", "HEAD") or "").strip() or None


def uncommitted(*paths: str) -> list[str]:
    """Uncommitted files under ``paths`` of this checkout."""
    dirty = _git("status", "--porcelain", "--", *paths) or ""
    return [ln[3:] for ln in dirty.splitlines() if ln.strip()]


# --------------------------------------------------------------------------- the reference


def zv_version(python: str, cwd: str) -> str | None:
    """The zarr_vectors version that ``python`` imports (isolated mode, neutral cwd)."""
    try:
        out = subprocess.run(
            [python, "-I", "-c", "import zarr_vectors; print(zarr_vectors.__version__)"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=120,
            env=child_env(),
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def make_reference_venv(cwd: str, log: Callable[[str], None]) -> str:
    """Make (or reuse) the reference venv with ../shared/tools/reference-venv.sh; its python.

    Run from a neutral ``cwd``: the script's import check must not find this checkout.
    """
    if not REF_VENV_SCRIPT.exists():
        raise SystemExit(
            f"no reference venv at {DEFAULT_REF_VENV} and no {REF_VENV_SCRIPT} to make one; "
            "pass --reference-python"
        )
    log(f"making the reference venv with {REF_VENV_SCRIPT} (this downloads from PyPI)")
    out = subprocess.run(
        ["bash", str(REF_VENV_SCRIPT), str(DEFAULT_REF_VENV)], capture_output=True, text=True, cwd=cwd
    )
    if out.returncode != 0:
        raise SystemExit(f"reference-venv.sh failed:\n{out.stderr}")
    py = out.stdout.strip().splitlines()[-1]
    # abspath, not resolve(): resolve follows the venv's symlink out of the venv
    return py if os.path.isabs(py) else os.path.abspath(Path(cwd) / py)


def find_reference_python(explicit: str | None, cwd: str, log: Callable[[str], None]) -> str:
    """``explicit``, else the default reference venv's python (made if needed), checked."""
    if explicit:
        ver = zv_version(explicit, cwd)
        if ver != REFERENCE_VERSION:
            raise SystemExit(
                f"--reference-python {explicit} imports zarr_vectors {ver}, not the reference {REFERENCE_VERSION}"
            )
        return explicit
    candidate = DEFAULT_REF_VENV / "bin" / "python"
    if candidate.exists() and zv_version(str(candidate), cwd) == REFERENCE_VERSION:
        return str(candidate)
    py = make_reference_venv(cwd, log)
    if zv_version(py, cwd) != REFERENCE_VERSION:
        raise SystemExit(f"{py} does not import the reference zarr_vectors {REFERENCE_VERSION}")
    return py


# --------------------------------------------------------------------------- in a child


def peak_rss_mib() -> float:
    """Peak resident set size of this process (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def rchar() -> int | None:
    """Bytes this process has read so far (``/proc/self/io``), or None off Linux."""
    try:
        with open("/proc/self/io") as fh:
            for line in fh:
                if line.startswith("rchar:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def load_json(path: str) -> Any:
    with open(path) as fh:
        return json.load(fh)


def digest(*arrays: Any) -> str:
    """A short sha256 of numpy arrays' bytes (same data on both sides of a comparison)."""
    import hashlib

    import numpy as np

    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def answer(result: dict[str, Any]) -> int:
    """Print a child's result as the JSON object on its last stdout line."""
    sys.stdout.write("\n" + json.dumps(result) + "\n")
    return 0


# --------------------------------------------------------------------------- timing


def median(values: Iterable[float | None]) -> float | None:
    """The median of the values that are not None, or None."""
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def repeat(fn: Callable[[], Any], reps: int) -> tuple[list[float], Any]:
    """Call ``fn`` ``reps`` times; (wall seconds of each call, the last result)."""
    times, out = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def median_time(fn: Callable[[], Any], reps: int) -> float:
    """The median wall seconds of ``reps`` calls of ``fn``."""
    return statistics.median(repeat(fn, reps)[0])


def min_time(fn: Callable[[], Any], reps: int) -> float:
    """The fastest of ``reps`` calls of ``fn``, in seconds."""
    return min(repeat(fn, reps)[0])


# --------------------------------------------------------------------------- reports


def load_line() -> str:
    """``N cores, load average at end L`` (results say how busy the machine was)."""
    return f"{os.cpu_count()} cores, load average at end {os.getloadavg()[0]:.1f}"


def fmt(v: Any, spec: str) -> str:
    """``v`` formatted with ``spec``, or ``-`` for None and NaN."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return format(v, spec)


def ratio(a: Any, b: Any) -> float | None:
    """``a / b`` for two numbers with ``b`` non-zero, else None."""
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or b == 0:
        return None
    return a / b


def format_rows(rows: list[list[str]]) -> str:
    """A text table: first column left-aligned, the others right-aligned, a rule under the header."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for k, r in enumerate(rows):
        lines.append("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def store_stats(path: str) -> dict[str, int]:
    """Files, bytes and allocated bytes of a store folder."""
    files = size = disk = 0
    for root, _dirs, names in os.walk(path):
        for name in names:
            st = os.stat(os.path.join(root, name))
            files += 1
            size += st.st_size
            disk += st.st_blocks * 512
    return {"store_files": files, "store_bytes": size, "store_disk_bytes": disk}


def warm_cache(path: str) -> None:
    """Read every store file once so the query processes see a warm page cache."""
    for root, _dirs, names in os.walk(path):
        for name in names:
            with open(os.path.join(root, name), "rb") as fh:
                while fh.read(1 << 20):
                    pass
