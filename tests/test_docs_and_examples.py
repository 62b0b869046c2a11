"""Every code block of the docs, the examples and the demo run; the site builds without warnings.

Code blocks: in README.md every ```python block runs; in docs/ (every page, notes too)
every ```python and ```bash block runs. A page's blocks run in order in one temporary
folder, the Python ones sharing one namespace, the bash ones with ``set -euo pipefail``
and this interpreter's ``bin`` folder first on PATH (so ``zarr-vectors`` is this
checkout's). A block that must not run (a signature sketch, an install line) has the
HTML comment ``<!-- no-run -->`` on the line before its fence.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^(\s*)```(\w*)")
NO_RUN = "<!-- no-run -->"
DOC_PAGES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))


def code_blocks(text: str) -> list[tuple[str, str, bool, int]]:
    """``(language, code, runs, line number)`` of every fenced block, in order."""
    lines = text.splitlines()
    out: list[tuple[str, str, bool, int]] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = len(m.group(1)), m.group(2), i
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith("```"):
            j += 1
        code = "\n".join(line[indent:] for line in lines[i + 1 : j]) + "\n"
        runs = not (start > 0 and lines[start - 1].strip() == NO_RUN)
        out.append((lang, code, runs, start + 1))
        i = j + 1
    return out


def run_blocks(doc: str, languages: tuple[str, ...]) -> int:
    """Run the page's runnable blocks of ``languages`` in the current folder; returns how many ran."""
    namespace: dict[str, object] = {"__name__": "__doc__"}
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "MPLBACKEND": "Agg",
    }
    ran = 0
    for lang, code, runs, line in code_blocks((ROOT / doc).read_text(encoding="utf-8")):
        if not runs or lang not in languages:
            continue
        if lang == "python":
            exec(compile("\n" * line + code, doc, "exec"), namespace)
        else:
            proc = subprocess.run(
                ["bash", "-c", "set -euo pipefail\n" + code],
                capture_output=True,
                text=True,
                env=env,
                timeout=300,
            )
            assert proc.returncode == 0, f"{doc}:{line}: bash block failed\n{proc.stdout}\n{proc.stderr}"
        ran += 1
    return ran


def test_code_block_parser_honours_the_no_run_marker():
    text = "x\n```python\na = 1\n```\n<!-- no-run -->\n```python\nf(*, b) -> c\n```\n  ```bash\n  ls\n  ```\n"
    assert code_blocks(text) == [
        ("python", "a = 1\n", True, 2),
        ("python", "f(*, b) -> c\n", False, 6),
        ("bash", "ls\n", True, 9),
    ]


@pytest.mark.slow
def test_readme_python_blocks_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_blocks("README.md", ("python",)) > 0, "README.md has no python block"


@pytest.mark.slow
@pytest.mark.parametrize("doc", DOC_PAGES)
def test_docs_code_blocks_run(doc, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib").use("Agg")
    monkeypatch.chdir(tmp_path)
    try:
        run_blocks(doc, ("python", "bash"))
    finally:
        import matplotlib.pyplot as plt

        plt.close("all")


def test_every_docs_page_is_in_the_site_navigation():
    sys.path.insert(0, str(ROOT))
    try:
        from mkdocs_hooks import nav_from_index
    finally:
        sys.path.remove(str(ROOT))

    def pages(items):
        for item in items:
            yield from pages(next(iter(item.values()))) if isinstance(item, dict) else [item]

    listed = list(pages(nav_from_index(ROOT / "docs" / "index.md")))
    assert len(listed) == len(set(listed))
    missing = sorted({p[len("docs/") :] for p in DOC_PAGES} - set(listed))
    assert not missing, f"link these pages from docs/index.md (the site navigation): {missing}"
    assert not [p for p in listed if not (ROOT / "docs" / p).is_file()]


@pytest.mark.slow
def test_site_builds_without_warnings(tmp_path):
    pytest.importorskip("mkdocs")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "api" / "index.html").is_file()
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    assert "write_points" in api and ":class:" not in api


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "examples").glob("*.py")))
def test_examples_run(script, tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), str(tmp_path / "store.zarr")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_demo_runs_as_a_module(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "zarr_vectors.demo", str(tmp_path / "demo.zarr"), "--points", "20000"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "numpy brute force" in proc.stdout
    assert zv.open(tmp_path / "demo.zarr").vertex_count() == 20000


def test_demo_in_process_writes_and_checks_its_store(tmp_path, capsys):
    from zarr_vectors import demo

    demo.main([str(tmp_path / "demo.zarr"), "--points", "3000"])
    out = capsys.readouterr().out
    assert "wrote 3,000 synapses of 12 neurons" in out and "numpy brute force" in out
    ds = zv.open(tmp_path / "demo.zarr")
    assert ds.vertex_count() == 3000 and ds.num_objects() == 12 and len(ds.groups()) == 4
    with pytest.raises(SystemExit):
        demo.main([str(tmp_path / "none.zarr"), "--points", "0"])
    assert "'0' is not a whole number of points >= 1" in capsys.readouterr().err
    assert not (tmp_path / "none.zarr").exists()


def test_masked_object_attributes_read_back_absent(tmp_path):
    values = np.ma.masked_array(np.array([1, 2, 3], np.int16), mask=[False, True, False])
    ds = zv.write_points(
        tmp_path / "s.zarr",
        np.zeros((3, 2)),
        chunk_shape=1,
        object_ids=[0, 1, 2],
        object_attributes={"v": values},
        bounds=([0, 0], [1, 1]),
    )
    assert ds.object_attributes("v").tolist() == [1, np.iinfo(np.int16).min, 3]
