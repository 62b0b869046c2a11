"""Write a synthetic synapse point cloud to local disk, then query it.

Run with ``python -m zarr_vectors.demo [STORE] [--points N]`` (default ``./demo-store.zarr``,
500,000 points), or ``zarr-vectors demo [STORE] [--points N]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import zarr_vectors as zv


def make_synapses(n: int, n_neurons: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Synapse-like points clustered around neurons in a 1000 µm cube."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(100, 900, (n_neurons, 3))
    owner = rng.integers(0, n_neurons, n)
    pos = centres[owner] + rng.normal(0, 40, (n, 3))
    pos = np.clip(pos, 0, 1000).astype(np.float32)
    return {
        "positions": pos,
        "neuron": owner,
        "size": rng.gamma(2.0, 0.1, n).astype(np.float32),
        "region": (centres[:, 0] // 250).astype(np.int64),
    }


#: Points the demo writes unless told otherwise.
DEFAULT_POINTS = 500_000


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (``--points``)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of points >= 1")
    return value


def run(store: str, points: int = DEFAULT_POINTS) -> None:
    """Write ``points`` synapses (one neuron per 250, at most 2,000) to ``store``, then query it."""
    n_neurons = max(1, min(2_000, points // 250))
    data = make_synapses(points, n_neurons=n_neurons)
    regions = [np.flatnonzero(data["region"] == r) for r in range(4)]
    t0 = time.perf_counter()
    zv.write_points(
        store,
        data["positions"],
        chunk_shape=100,
        bin_shape=25,
        bounds=([0, 0, 0], [1000, 1000, 1000]),
        attributes={"size": data["size"]},
        object_ids=data["neuron"],
        object_attributes={"region": data["region"]},
        groups=regions,
        axes=["x", "y", "z"],
        units="micrometer",
        overwrite=True,
    )
    t_write = time.perf_counter() - t0
    ds = zv.open(store)
    print(ds)
    print(f"wrote {ds.vertex_count():,} synapses of {ds.num_objects():,} neurons in {t_write:.2f} s")

    lo, hi = np.array([300.0, 300.0, 300.0]), np.array([450.0, 500.0, 420.0])
    t0 = time.perf_counter()
    box = ds.query(bbox=(lo, hi))
    t_query = time.perf_counter() - t0
    pos = data["positions"]
    expected = int(np.all((pos >= lo) & (pos <= hi), axis=1).sum())
    print(
        f"box {lo.tolist()}..{hi.tolist()}: {len(box):,} synapses in {t_query * 1e3:.1f} ms "
        f"(numpy brute force over all points: {expected:,})"
    )
    assert len(box) == expected
    if len(box):
        assert box.object_ids is not None  # the store has an object index
        neurons = len(np.unique(box.object_ids))
        print(f"  mean size {box.attributes['size'].mean():.3f}, from {neurons} neurons")

    one = min(7, n_neurons - 1)
    neuron = ds.objects([one])
    assert len(neuron) == int((data["neuron"] == one).sum())
    print(f"neuron {one}: {len(neuron)} synapses, region {int(ds.object_attributes('region', [one])[0])}")
    g = ds.groups()
    print(f"groups (regions): {[len(m) for m in g]} neurons each")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("store", nargs="?", default="demo-store.zarr", help="where to write (a directory)")
    parser.add_argument(
        "--points",
        type=positive_int,
        default=DEFAULT_POINTS,
        help=f"number of synapses to write (default {DEFAULT_POINTS:,})",
    )
    args = parser.parse_args(argv)
    run(args.store, args.points)


if __name__ == "__main__":
    main()
