"""Seeded fuzz of the URLs ``serve`` answers (issue 28, item 10).

Each case takes a real route of a served store (points with objects and a pyramid, a
skeleton, a mesh: ``StoreSource.paths()`` plus the client's ``/events`` and ``/state``
paths), mutates one to three path segments (long, Unicode, signed, huge or non-ASCII
numbers, NUL and control bytes, bad UTF-8, dot segments, cells of another rank, segments
of other routes, cut or grown paths), and sends it with a random method and sometimes a
``Range`` or ``Origin`` header (a seventh of the cases keep the route as it is). Every answer must be an HTTP status below 500, and every
``200`` / ``206`` body exactly what :meth:`StoreSource.get` gives for the decoded path.
The outcome counts are printed (``-s``) and kept in :data:`OUTCOMES` of the last run.
"""

from __future__ import annotations

import random
import urllib.parse
from collections import Counter
from collections.abc import Iterator

import pytest

import zarr_vectors as zv
from tests._serve_stores import build_stores, get
from zarr_vectors.neuroglancer.server import Server
from zarr_vectors.neuroglancer.source import NotFound, StoreSource

SEED = 28
CASES = 3000
OUTCOMES: Counter[str] = Counter()
_UNICODE_DIGITS = ["%D9%A3", "%C2%B2", "%EF%BC%91", "%DF%81", "%E0%B9%93", "%E2%91%A0"]
_BYTES = ["%00", "%0A", "%0D%0A", "%7F", "%FF", "%C0%AF", "%ED%A0%80", "%25", "%2F", "%5C", "\\", "%20"]


def _number(rng: random.Random) -> str:
    """A number-like segment: digits of many lengths, signs, bases, floats, 64-bit edges."""
    forms = [
        lambda: "".join(
            rng.choice("0123456789") for _ in range(rng.choice([1, 2, 19, 20, 21, 300, 4301, 5000]))
        ),
        lambda: str(rng.choice([2**63 - 1, 2**63, 2**64 - 1, 2**64, 2**62 + 1, 0, 1, 7, 8, 1000, 11000])),
        lambda: rng.choice(["-", "+", " ", "0x", "0b", ""]) + str(rng.randrange(100)),
        lambda: (
            f"{rng.random() * 1000:.3f}" if rng.random() < 0.5 else f"{rng.randrange(9)}e{rng.randrange(30)}"
        ),
        lambda: rng.choice(_UNICODE_DIGITS) * rng.randrange(1, 4),
        lambda: str(rng.randrange(10)) + rng.choice(_BYTES) + str(rng.randrange(10)),
    ]
    return rng.choice(forms)()


def _mutate(seg: str, rng: random.Random, pool: list[str]) -> str:
    choice = rng.randrange(9)
    if choice == 0:
        return _number(rng)
    if choice == 1 and "_" in seg:  # a cell of another rank, or with a bad coordinate
        parts = seg.split("_")
        op = rng.randrange(3)
        if op == 0:
            return "_".join(parts + [str(rng.randrange(4))] * rng.randrange(1, 3000))
        if op == 1:
            return "_".join(parts[: rng.randrange(len(parts))])
        parts[rng.randrange(len(parts))] = _number(rng)
        return "_".join(parts)
    if choice == 2:
        k = rng.randrange(len(seg) + 1)
        return seg[:k] + rng.choice(_BYTES) + seg[k:]
    if choice == 3:
        return rng.choice(
            ["..", ".", "", "%2e%2e", "%2E", "~", "*", "info", "spatial0", "by_id", "index.html"]
        )
    if choice == 4:
        return rng.choice(pool)
    if choice == 5:
        return seg.upper() if seg.islower() else seg + rng.choice([".index", ":0", ".json", "/", "//"])
    if choice == 6:
        return "".join(
            rng.choice("abcdefghijklmnopqrstuvwxyz0123456789_-.:") for _ in range(rng.randrange(1, 40))
        )
    if choice == 7:
        return "%" + "".join(rng.choice("0123456789ABCDEFGZ") for _ in range(rng.randrange(0, 3)))
    return _number(rng) + rng.choice(["", ".index", ":0"])


def _case(rng: random.Random, routes: list[str], pool: list[str]) -> tuple[str, str, dict[str, str]]:
    """``(method, path, headers)`` of one case."""
    segs = rng.choice(routes).split("/")
    for _ in range(rng.choice([0, 1, 1, 1, 1, 2, 3])):  # 0: the route as it is
        i = rng.randrange(1, len(segs))
        segs[i] = _mutate(segs[i], rng, pool)
    if rng.random() < 0.1:
        segs = segs[: rng.randrange(1, len(segs) + 1)]
    elif rng.random() < 0.1:
        segs.append(_mutate("x", rng, pool))
    path = "/".join(segs).replace(" ", "%20")
    method = rng.choices(["GET", "HEAD", "OPTIONS", "POST"], [80, 10, 5, 5])[0]
    headers: dict[str, str] = {}
    if rng.random() < 0.15:
        a, b = rng.randrange(-5, 500), rng.randrange(-5, 500)
        headers["Range"] = rng.choice(
            [f"bytes={a}-{b}", f"bytes={a}-", f"bytes=-{b}", "bytes=0-1,4-5", "bits=0-1"]
        )
    if rng.random() < 0.1:
        headers["Origin"] = rng.choice(["https://evil.example", "null", "http://127.0.0.1"])
    if method == "POST":
        headers["Content-Length"] = "0"
    if path.startswith("/events/") and method == "GET":
        method = "HEAD"  # a GET there is the (endless) stream, tested on its own
    return method, path, headers


def _truth(sources: dict[str, StoreSource], path: str) -> bytes | None:
    """What a ``200`` must hold for ``path``, or None when the path has no body."""
    try:
        decoded = urllib.parse.unquote(path.split("?", 1)[0].split("#", 1)[0], errors="strict")
    except UnicodeDecodeError:
        return None
    if not decoded.startswith("/zv/"):
        return None
    name, _, rest = decoded[4:].partition("/")
    if name not in sources:
        return None
    try:
        return sources[name].get(rest)[0]
    except (NotFound, zv.ZarrVectorsError):
        return None


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, dict[str, StoreSource]]]:
    stores = build_stores(tmp_path_factory.mktemp("fuzz-serve"))
    with zv.serve(list(stores.values()), client=False) as server:
        yield server, {s.name: StoreSource(zv.open(s.ds._store.description), s.name) for s in server.sources}


@pytest.mark.slow
def test_fuzz_served_urls(served: tuple[Server, dict[str, StoreSource]]) -> None:
    server, sources = served
    port = int(server.url.rsplit(":", 1)[1])
    rng = random.Random(SEED)
    routes = ["/events/zv", "/state/zv", "/favicon.ico"]
    for name, src in sources.items():
        paths = list(src.paths())
        routes += [f"/zv/{name}/{p}" for p in rng.sample(paths, min(40, len(paths)))]
    pool = sorted({seg for r in routes for seg in r.split("/") if seg})
    OUTCOMES.clear()
    bad = []
    for _ in range(CASES):
        method, path, headers = _case(rng, routes, pool)
        answer = get(port, path, headers, method=method)
        status = answer.status
        if status is None or status >= 500:
            OUTCOMES[f"{status}"] += 1
            bad.append((method, path[:120], status))
            continue
        if status in (200, 206) and method == "GET" and path.startswith("/zv/"):
            want = _truth(sources, path)
            if status == 206 and want is not None:
                span = answer.headers["content-range"].split()[1].split("/")[0]
                lo, hi = (int(v) for v in span.split("-"))
                want = want[lo : hi + 1]
            if want is None or answer.body != want:
                OUTCOMES[f"{status} wrong body"] += 1
                bad.append((method, path[:120], f"{status} with a body that is not the source's"))
                continue
            OUTCOMES[f"{status} right body"] += 1
            continue
        OUTCOMES[str(status)] += 1
    print(
        f"\nserve fuzz, seed {SEED}, {CASES} cases: "
        + ", ".join(f"{k}: {v}" for k, v in sorted(OUTCOMES.items()))
    )
    assert sum(OUTCOMES.values()) == CASES
    assert not bad, bad[:20]
