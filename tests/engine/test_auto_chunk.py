"""``chunk_shape="auto"``: chunks sized from the data for every one-shot writer, from
``bounds`` and ``expected_vertices`` for ``create``, and explicit shapes kept as given."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.engine import AUTO_VERTICES_PER_CHUNK, auto_chunk_shape, expected_chunk_edge
from zarr_vectors.engine.write.autochunk import auto_chunk_edge, mean_chunk_count
from zarr_vectors.errors import InputError

T = AUTO_VERTICES_PER_CHUNK


def _uniform(seed: int) -> tuple[np.ndarray, int]:
    rng = np.random.default_rng(seed)
    d = 2 + seed % 2
    n = int(rng.integers(20, 60)) * T
    lo = rng.uniform(-1e4, 1e4, d)
    span = rng.uniform(100, 5000, d)
    return (lo + rng.uniform(0, 1, (n, d)) * span).astype(np.float32), d


def _clustered(seed: int) -> np.ndarray:
    """A mixture of 3 to 30 Gaussians of random widths and weights."""
    rng = np.random.default_rng(seed)
    d = 2 + seed % 2
    n = int(rng.integers(20, 60)) * T
    k = int(rng.integers(3, 30))
    centres = rng.uniform(-500, 1500, (k, d))
    sigma = rng.uniform(5, 120, k)
    label = rng.choice(k, n, p=rng.dirichlet(np.ones(k)))
    return (centres[label] + rng.standard_normal((n, d)) * sigma[label, None]).astype(np.float32)


def _extent(p: np.ndarray) -> np.ndarray:
    return np.array([p.min(axis=0), p.max(axis=0)], np.float64)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_auto_hits_the_target_per_nonempty_chunk(seed):
    """Uniform and clustered data, 2-D and 3-D, anywhere in space: the mean vertices per
    non-empty chunk (exact, over every vertex) is within 1.5x of the target."""
    for pts in (_uniform(seed)[0], _clustered(seed)):
        edge = auto_chunk_edge(pts, _extent(pts))
        mean = mean_chunk_count(pts, edge)
        assert T / 1.5 <= mean <= T * 1.5, (seed, edge, mean)


def test_clustered_data_gets_smaller_chunks_than_its_extent_implies():
    """Five tight clusters in a wide box: the extent-and-count edge leaves their chunks far
    above the target; auto brings them back to it."""
    rng = np.random.default_rng(1)
    centres = rng.uniform(0, 1000, (5, 3))
    pts = (centres[rng.integers(0, 5, 40 * T)] + rng.standard_normal((40 * T, 3)) * 15).astype(np.float32)
    box = _extent(pts)
    naive = expected_chunk_edge(box, len(pts))
    assert mean_chunk_count(pts, naive) > 3 * T
    edge = auto_chunk_edge(pts, box)
    assert edge < naive / 2
    assert T / 1.5 <= mean_chunk_count(pts, edge) <= T * 1.5


@pytest.mark.slow
def test_write_points_defaults_to_auto_and_keeps_explicit_shapes():
    pts = _uniform(0)[0][: 4 * T]
    ds = zv.write_points("memory://auto-default", pts)
    expected = auto_chunk_shape(pts, _extent(pts))
    assert ds.chunk_shape.tolist() == expected.tolist()
    assert ds.vertex_count() == len(pts)
    assert (
        zv.write_points("memory://auto-named", pts, chunk_shape="auto").chunk_shape.tolist()
        == expected.tolist()
    )
    assert zv.write_points("memory://auto-explicit", pts, chunk_shape=25).chunk_shape.tolist() == [25.0, 25.0]
    per_axis = zv.write_points("memory://auto-axes", pts, chunk_shape=(30, 40))
    assert per_axis.chunk_shape.tolist() == [30.0, 40.0]


def test_auto_rounds_up_to_whole_bins():
    pts = np.random.default_rng(3).uniform(0, 1000, (4 * T, 3)).astype(np.float32)
    ds = zv.write_points("memory://auto-bins", pts, bin_shape=(70, 70, 90))
    cs, bs = ds.chunk_shape, ds.bin_shape
    assert bs.tolist() == [70.0, 70.0, 90.0]
    ratio = cs / bs
    assert np.allclose(ratio, np.round(ratio)) and np.all(ratio >= 1)


def test_small_and_flat_inputs_get_one_chunk_per_flat_axis():
    one = zv.write_points("memory://auto-one", [[5.0, 5.0, 5.0]])
    assert one.vertex_count() == 1 and np.all(one.chunk_shape > 0)
    flat = np.random.default_rng(4).uniform(0, 100, (8 * T, 3)).astype(np.float32)
    flat[:, 2] = 7.0
    ds = zv.write_points("memory://auto-flat", flat)
    assert len(ds.level(0).vertices.nonempty) >= 4
    assert np.unique(ds.level(0).vertices.nonempty[:, 2]).size == 1
    few = np.random.default_rng(5).uniform(0, 999, (1000, 2))
    assert len(zv.write_points("memory://auto-few", few).level(0).vertices.nonempty) == 1


def test_every_one_shot_writer_takes_auto_by_default():
    rng = np.random.default_rng(6)
    walks = [np.cumsum(rng.normal(0, 5, (50, 3)), axis=0) + 500 for _ in range(40)]
    verts = np.concatenate(walks)
    lines = zv.write_lines("memory://auto-lines", walks)
    assert lines.chunk_shape.tolist() == auto_chunk_shape(verts, _extent(verts)).tolist()
    pos = rng.uniform(0, 10, (30, 3))
    parents = np.r_[-1, np.arange(29)]
    assert zv.write_skeleton("memory://auto-skel", pos, parents).vertex_count() == 30
    edges = np.c_[np.arange(29), np.arange(1, 30)]
    assert zv.write_graph("memory://auto-graph", pos, edges).vertex_count() == 30
    tri_v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], np.float32)
    tri_f = np.array([[0, 1, 2]])
    assert zv.write_mesh("memory://auto-mesh", tri_v, tri_f).vertex_count() == 3
    assert zv.write_meshes("memory://auto-meshes", [(tri_v, tri_f), (tri_v + 5, tri_f)]).num_objects() == 2
    shapely = pytest.importorskip("shapely")
    geoms = [shapely.box(0, 0, 1, 1), shapely.Point(6, 6)]
    assert zv.write_geometries("memory://auto-geoms", geoms).num_objects() == 2


def test_create_points_sizes_auto_from_bounds_and_expected_vertices():
    bounds = ([0, 0, 0], [1000, 1000, 1000])
    with zv.create("memory://auto-create", "points", bounds=bounds, expected_vertices=2_000_000) as w:
        w.append(np.random.default_rng(7).uniform(0, 1000, (1000, 3)))
    edge = expected_chunk_edge(np.asarray(bounds, float), 2_000_000)
    assert zv.open("memory://auto-create").chunk_shape.tolist() == [edge] * 3
    assert (1000 / edge) ** 3 == pytest.approx(2_000_000 / T, rel=0.05)


@pytest.mark.parametrize(
    ("kwargs", "missing"),
    [
        ({}, "bounds and expected_vertices missing"),
        ({"bounds": ([0, 0], [1, 1])}, "expected_vertices missing"),
        ({"expected_vertices": 10}, "bounds missing"),
        ({"chunk_shape": "auto", "expected_vertices": 10}, "bounds missing"),
    ],
)
def test_create_refuses_auto_without_bounds_and_count(kwargs, missing):
    with pytest.raises(InputError, match="create\\(\\) of points with chunk_shape='auto'") as err:
        zv.create("memory://auto-refused", "points", **kwargs)
    assert missing in str(err.value)


def test_create_refuses_a_bad_expected_count():
    with pytest.raises(InputError, match="expected_vertices must be a positive integer, got 0"):
        zv.create("memory://auto-bad", "points", bounds=([0], [1]), expected_vertices=0)
    with pytest.raises(InputError, match="expected_vertices sizes chunk_shape='auto'"):
        zv.create("memory://auto-both", "points", chunk_shape=1, bounds=([0], [1]), expected_vertices=5)


def test_create_lines_without_count_sizes_chunks_from_the_joined_batches():
    rng = np.random.default_rng(8)
    walks = [np.cumsum(rng.normal(0, 5, (40, 3)), axis=0) for _ in range(20)]
    with zv.create("memory://auto-create-lines", "lines") as w:
        w.append(walks[:10])
        w.append(walks[10:])
    verts = np.concatenate(walks)
    ds = zv.open("memory://auto-create-lines")
    assert ds.chunk_shape.tolist() == auto_chunk_shape(verts, _extent(verts)).tolist()


def _sphere(centre: np.ndarray, radius: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """A closed-ish latitude-longitude sphere surface: k * k vertices, 2 (k - 1) k triangles."""
    th, ph = np.meshgrid(
        np.linspace(0.05, np.pi - 0.05, k), np.linspace(0, 2 * np.pi, k, endpoint=False), indexing="ij"
    )
    unit = np.c_[
        np.sin(th).ravel() * np.cos(ph).ravel(), np.sin(th).ravel() * np.sin(ph).ravel(), np.cos(th).ravel()
    ]
    i, j = np.meshgrid(np.arange(k - 1), np.arange(k), indexing="ij")
    a, b = (i * k + j).ravel(), (i * k + (j + 1) % k).ravel()
    faces = np.r_[np.c_[a, b, a + k], np.c_[b, b + k, a + k]]
    return (unit * radius + centre).astype(np.float32), faces


def _brute_nonempty(vertices: np.ndarray, chunk_shape: np.ndarray) -> int:
    return len(np.unique(np.floor(vertices / chunk_shape).astype(np.int64), axis=0))


@pytest.mark.slow
def test_surfaces_and_lines_hold_the_target_per_nonempty_chunk():
    """Vertices on 2-D surfaces in 3-D (one large sphere; many small ones) and random-walk
    polylines leave most chunks of a cube grid empty: auto still puts the target in each
    non-empty chunk (mean within 1.5x, counted by brute force and matching the store)."""
    rng = np.random.default_rng(9)
    big = _sphere(np.array([500.0, 500, 500]), 480.0, int(np.sqrt(16 * T)))
    small = [_sphere(rng.uniform(0, 2000, 3), rng.uniform(10, 80), int(np.sqrt(T / 2))) for _ in range(48)]
    walks = [
        np.cumsum(rng.normal(0, 4, (int(m), 3)), axis=0) + rng.uniform(0, 1000, 3)
        for m in rng.integers(50, 200, 16 * T // 125)
    ]
    stores = {
        "sphere": (zv.write_mesh("memory://auto-sphere", *big), big[0]),
        "spheres": (zv.write_meshes("memory://auto-spheres", small), np.concatenate([v for v, _ in small])),
        "lines": (zv.write_lines("memory://auto-walks", walks), np.concatenate(walks)),
    }
    for name, (ds, verts) in stores.items():
        cs = np.asarray(ds.chunk_shape)
        chunks = _brute_nonempty(verts.astype(np.float64), cs)
        assert len(ds.level(0).vertices.nonempty) == chunks, name
        assert ds.vertex_count() == len(verts), name
        assert chunks >= 8, (name, chunks)
        assert T / 1.5 <= len(verts) / chunks <= T * 1.5, (name, cs, len(verts) / chunks)


def test_the_target_is_the_one_the_docs_and_writers_state():
    """docs/writing.md and every writer's docstring name AUTO_VERTICES_PER_CHUNK, the measured
    target (docs/writing.md gives the curve), and nothing else."""
    figure = f"{T:,}"
    root = Path(__file__).resolve().parents[2]
    assert f"**{figure} vertices" in (root / "docs" / "writing.md").read_text()
    for writer in (
        zv.write_points,
        zv.write_lines,
        zv.write_skeleton,
        zv.write_graph,
        zv.write_mesh,
        zv.write_geometries,
        zv.create,
    ):
        doc = " ".join((writer.__doc__ or "").split())
        assert f"{figure} vertices" in doc, writer.__name__
