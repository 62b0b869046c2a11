"""Every store the reference 0.9.2 writes, and considers valid, passes this validator.

The stores come from ``reference_writer.py`` (run with the reference interpreter, through
the interop fixture: skipped unless it is available, failed when ZV_REQUIRE_INTEROP=1).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from zarr_vectors.validation import validate

pytestmark = pytest.mark.interop

WRITER = Path(__file__).with_name("reference_writer.py")
NAMES = [
    "points",
    "points_sharded",
    "polylines",
    "streamlines",
    "lines",
    "graph",
    "skeleton",
    "mesh",
    "pyramid",
]


@pytest.fixture(scope="module")
def reference_stores(reference, tmp_path_factory) -> dict[str, dict]:
    out = tmp_path_factory.mktemp("reference-stores")
    proc = subprocess.run(
        [reference.python, "-I", str(WRITER), str(out), *NAMES],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=out,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("name", NAMES)
def test_reference_store_passes(name, reference_stores):
    entry = reference_stores[name]
    assert "write_error" not in entry, entry.get("traceback")
    assert entry["valid"], entry["errors"]  # the reference itself accepts it
    report = validate(entry["path"])
    assert report.ok, str(report)
    assert report.cells_checked > 0
    # The reference leaves format_capabilities empty: the one warning we give for that.
    assert {w.rule for w in report.warnings} <= {"metadata.capabilities"}


def test_reference_pyramid_is_checked_across_levels(reference_stores):
    path = Path(reference_stores["pyramid"]["path"])
    assert (path / "1" / "links" / "-1").is_dir() and (path / "0" / "links" / "+1").is_dir()
    doc = json.loads((path / "zarr.json").read_text())
    doc["attributes"]["zarr_vectors"]["format_capabilities"].remove("multiscale_links")
    (path / "zarr.json").write_text(json.dumps(doc))
    cell = sorted(p for p in (path / "0/links/+1/0.0.0/c").rglob("*") if p.is_file())[0]
    raw = bytearray(cell.read_bytes())  # the reference writes these cells uncompressed
    raw[-8:] = (10**6).to_bytes(8, "little")  # the last record's level-1 row
    cell.write_bytes(bytes(raw))
    report = validate(path)
    assert sorted(p.rule for p in report.problems) == ["consistency.link-index", "pyramid.cross-level"]
    bad = [p for p in report.problems if p.rule == "consistency.link-index"][0]
    assert (
        bad.path.startswith("0/links/+1/0.0.0/c/") and "level 1" in bad.message and "1000000" in bad.message
    )
