"""Collection.objects([id]) across a mesh, a skeleton and a synapse member, against the sum of
the three members' own Dataset.objects([id]) (issue 33's target: at most 1.2x).

    .venv/bin/python benchmarks/bench_collection.py          # 2,000 neurons, 10^6 synapses
    .venv/bin/python benchmarks/bench_collection.py --neurons 500 --synapses 100000 --ids 50

The collection: ``meshes`` (one closed mesh per neuron), ``skeletons`` (one branching tree per
neuron) and ``synapses`` (points grouped by their post-synaptic neuron, with ``pre_segment``
and ``post_segment`` relationships), all three in the id space ``segments``. Each id is timed
both ways back to back (the order alternating), on the same opened members, after one warm-up
pass; the answers are compared array by array (exit status 1 on a difference). The load
average is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import zarr_vectors as zv


def _sphere(rings: int = 8, sectors: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """A closed UV sphere of radius 1: (vertices, faces)."""
    theta = np.linspace(0, np.pi, rings + 1)[1:-1]
    phi = np.linspace(0, 2 * np.pi, sectors, endpoint=False)
    t, p = np.meshgrid(theta, phi, indexing="ij")
    ring = np.stack([np.sin(t) * np.cos(p), np.sin(t) * np.sin(p), np.cos(t)], -1).reshape(-1, 3)
    verts = np.concatenate([[[0, 0, 1]], ring, [[0, 0, -1]]])
    faces = []
    for j in range(sectors):
        k = (j + 1) % sectors
        faces.append([0, 1 + j, 1 + k])
        for i in range(rings - 2):
            a, b = 1 + i * sectors + j, 1 + i * sectors + k
            faces += [[a, a + sectors, b], [b, a + sectors, b + sectors]]
        last = 1 + (rings - 2) * sectors
        faces.append([last + j, len(verts) - 1, last + k])
    return verts, np.asarray(faces, np.int64)


def build(
    work: Path, neurons: int, synapses: int, rng: np.random.Generator
) -> tuple[zv.Collection, np.ndarray]:
    """The collection and its segment ids."""
    seg = np.sort(np.uint64(2**63) + rng.choice(2**40, neurons, replace=False).astype(np.uint64))
    centre = rng.uniform(0, 10_000, (neurons, 3))
    verts, faces = _sphere()
    meshes = [(verts * rng.uniform(20, 60) + c, faces) for c in centre]
    n_sk = 60  # a trunk of 40 and a branch of 20 from its 10th node
    parents = np.r_[-1, np.arange(39), 10, np.arange(40, 59)]
    sk_pos = centre[:, None, :] + np.cumsum(rng.normal(0, 15, (neurons, n_sk, 3)), axis=1)
    sk_parents = (parents[None, :] + np.where(parents >= 0, np.arange(neurons)[:, None] * n_sk, 0)).reshape(
        -1
    )
    owner = rng.integers(0, neurons, synapses)
    post = seg[owner]
    pre = seg[rng.integers(0, neurons, synapses)]
    syn_pos = centre[owner] + rng.normal(0, 200, (synapses, 3))
    coll = zv.create_collection(work / "c.zarr", id_spaces=["segments"])
    coll.add_member("meshes", "meshes", meshes, object_ids=seg, id_space="segments")
    coll.add_member(
        "skeletons", "skeleton", sk_pos.reshape(-1, 3), sk_parents,
        object_ids=np.repeat(seg, n_sk), id_space="segments",
    )  # fmt: skip
    coll.add_member(
        "synapses", "points", syn_pos.astype("float32"), object_ids=post,
        attributes={"pre_segment": pre, "post_segment": post}, id_space="segments",
        relationships={"pre_segment": "segments", "post_segment": "segments"},
    )  # fmt: skip
    return zv.open(work / "c.zarr"), seg


def _same(a: zv.Result, b: zv.Result) -> bool:
    pairs = [
        (a.positions, b.positions),
        (a.object_ids, b.object_ids),
        (a.faces, b.faces),
        (a.parents, b.parents),
    ]
    pairs += [(a.attributes.get(k), v) for k, v in b.attributes.items()]
    return set(a.attributes) == set(b.attributes) and all(
        (x is None and y is None) or (x is not None and y is not None and np.array_equal(x, y))
        for x, y in pairs
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--neurons", type=int, default=2000, help="segments: meshes and skeletons")
    parser.add_argument("--synapses", type=int, default=1_000_000)
    parser.add_argument("--ids", type=int, default=200, help="ids timed, one objects([id]) call each")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(dir=args.workdir))
    try:
        rng = np.random.default_rng(0)
        print(f"load average at start: {os.getloadavg()[0]:.2f}")
        t0 = time.perf_counter()
        coll, seg = build(work, args.neurons, args.synapses, rng)
        print(
            f"write: {time.perf_counter() - t0:.1f} s for {args.neurons:,} meshes and skeletons, {args.synapses:,} synapses"
        )
        members = {n: coll.member(n) for n in ("meshes", "skeletons", "synapses")}
        ids = rng.choice(seg, args.ids, replace=False).tolist()
        for i in ids[:5]:  # warm-up: level metadata, shard indexes, id maps
            coll.objects([i])
            for ds in members.values():
                ds.objects([i])
        both, own, bad = [], [], 0
        for k, i in enumerate(ids):

            def ours(i: int = i) -> dict[str, zv.Result]:
                return coll.objects([i])

            def theirs(i: int = i) -> dict[str, zv.Result]:
                return {n: ds.objects([i]) for n, ds in members.items()}

            runs = [ours, theirs] if k % 2 == 0 else [theirs, ours]
            times = {}
            answers = {}
            for fn in runs:
                t = time.perf_counter()
                answers[fn.__name__] = fn()
                times[fn.__name__] = time.perf_counter() - t
            both.append(times["ours"])
            own.append(times["theirs"])
            a, b = answers["ours"], answers["theirs"]
            if set(a) != set(b) or not all(_same(a[n], b[n]) for n in b):
                bad += 1
        load = os.getloadavg()[0]
        m_coll, m_sum = statistics.median(both), statistics.median(own)
        ratios = [x / y for x, y in zip(both, own, strict=True)]
        print(
            f"Collection.objects([id]): median {m_coll * 1e3:.2f} ms; sum of the 3 members' objects([id]): "
            f"median {m_sum * 1e3:.2f} ms; ratio of medians {m_coll / m_sum:.3f}, median per-id ratio "
            f"{statistics.median(ratios):.3f} ({len(ids)} ids; load average {load:.2f})"
        )
        print(f"answers: {len(ids) - bad} of {len(ids)} equal")
        return 1 if bad else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
