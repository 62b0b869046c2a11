"""Shared fixtures and helpers, and the rule that marks tests ``slow``.

``pytest -m "not slow"`` is the quick loop; plain ``pytest`` (CI) runs everything. Besides the
tests and modules marked ``slow`` by hand (the CLI run as a process, docs builds, kill and race
tests, anything over about a second), :func:`pytest_collection_modifyitems` marks every test
that uses the reference implementation, an S3 server or the GCS emulator, everything under ``tests/interop``
and ``tests/fuzz`` (so new tests of those kinds are slow without anyone remembering), and the
measured slowest tests listed in :data:`SLOW_TESTS`.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

import numpy as np
import pytest

from tests._reference import reference  # noqa: F401  (the fixture, for every test folder)

TESTS = Path(__file__).resolve().parent
#: A test that uses one of these fixtures (directly or through another fixture) is slow.
SLOW_FIXTURES = frozenset({"reference", "s3_server", "gcs_server"})
#: A test with one of these marks is slow (``s3``: a moto server; ``interop``: the reference).
SLOW_MARKS = ("s3", "interop")
#: Every test in these folders of ``tests/`` is slow.
SLOW_FOLDERS = frozenset({"interop", "fuzz"})
#: Tests (``fnmatch`` patterns of node ids) that ``--durations`` showed to be the quick loop's
#: slowest; of a parametrised family, one or two representatives stay in the quick loop.
SLOW_TESTS = (
    "tests/validate/test_broken_stores.py::test_broken_store_is_reported[[][cgp]*",  # metadata.* stay
    "tests/kinds/test_points.py::test_box_queries_match_brute_force[[]0.[15]*",
    "tests/kinds/test_points.py::test_box_queries_match_brute_force[[]0.001*",
    "tests/kinds/test_points.py::test_full_read_returns_every_point_and_attribute*",
    "tests/kinds/test_points.py::test_negative_coordinates_write_a_grid_origin*",
    "tests/test_zarr_compat.py::test_zarr_python_decodes_every_cell_we_write[[][!z]*",  # zstd, zlib stay
    "tests/engine/test_compression.py::test_every_compression_round_trips_every_kind[[][!z]*",  # zstd, zlib stay
    "tests/engine/test_compression.py::test_every_compression_round_trips_every_kind[[]zlib*",
    "tests/engine/test_compression.py::test_pyramid_of_lines_keeps_the_compression[[][!z]*",
    "tests/kinds/test_meshes.py::test_both_face_families_keep_winding[[]False*",
    "tests/kinds/test_meshes.py::test_box_sub_mesh_inside_and_touching_match_brute_force[[]1*",
    "tests/kinds/test_skeletons.py::test_objects_come_back_in_input_order*",
    "tests/test_tables.py::test_dataframe_columns_are_the_rows*",
    "tests/dataset/test_roi.py::test_mesh_faces_inside_a_polygon*",
    "tests/pyramid/test_pyramid_linked.py::test_skeleton_keeps_roots_leaves_and_branches*",
    "tests/pyramid/test_pyramid_subsample.py::test_each_level_is_a_nested_subset_with_attributes_unchanged*",
    "tests/pyramid/test_pyramid_points.py::test_level_for_and_max_vertices_read_no_vertex_data*",
    "tests/pyramid/test_pyramid_points.py::test_reductions_can_be_chosen*",
    "tests/pyramid/test_pyramid_meshes.py::test_mesh_sparsity_by_size_and_zip_refusal*",
    "tests/shards/test_sharded_stores.py::test_pyramids_build_on_sharded_stores*",
    "tests/io/test_point_files.py::test_las_round_trip_keeps_every_dimension_exactly[[].laz*",
    "tests/storage/test_http.py::*",  # a static HTTP server per module, like the S3 tests
    "tests/storage/test_hostile_local.py::test_fifo_is_refused_without_blocking*",
    "tests/codecs/test_draco.py::test_property_every_vertex_and_face_round_trips*",
)


def is_slow(item: pytest.Item) -> bool:
    """Whether the collection rule marks ``item`` slow (hand-made ``slow`` marks aside)."""
    path = Path(str(item.fspath)).resolve()
    folder = path.relative_to(TESTS).parts[0] if path.is_relative_to(TESTS) else ""
    return (
        folder in SLOW_FOLDERS
        or any(fnmatch.fnmatchcase(item.nodeid, pattern) for pattern in SLOW_TESTS)
        or not SLOW_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))
        or any(item.get_closest_marker(m) is not None for m in SLOW_MARKS)
    )


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if is_slow(item):
            item.add_marker(pytest.mark.slow)


def brute_force_box(positions: np.ndarray, lo, hi) -> np.ndarray:
    """Boolean mask of rows with lo <= p <= hi on every axis."""
    return np.all((positions >= np.asarray(lo)) & (positions <= np.asarray(hi)), axis=1)


def sorted_rows(*columns: np.ndarray) -> np.ndarray:
    """Rows of the horizontally stacked columns in lexicographic order (for set comparison)."""
    arrays = [np.asarray(c, np.float64) for c in columns]
    table = np.column_stack([a.reshape(len(a), int(np.prod(a.shape[1:], dtype=np.int64))) for a in arrays])
    return table[np.lexsort(table.T[::-1])] if len(table) else table


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
