"""The first view of a Neuroglancer state in headless Chromium, measured from the browser's
side (the DevTools ``Network`` domain): seconds to the first frame that shows geometry (a
pixel check of the 3-D panel's centre), and the requests and bytes of the source URLs until
the viewer has been idle for a while. Used by the overview's browser test and
``benchmarks/bench_overview.py``."""

from __future__ import annotations

import asyncio
import io
import json
import time
import urllib.parse
from typing import Any

import numpy as np

#: State options that leave only the layers' geometry in the 3-D panel (no axis lines,
#: slices, scale bar or default annotations).
PLAIN = {
    "layout": "3d",
    "showAxisLines": False,
    "showSlices": False,
    "showScaleBar": False,
    "showDefaultAnnotations": False,
}


def plain_url(viewer_url: str, state: dict[str, Any] | None = None) -> str:
    """``viewer_url``'s client with ``state`` (default the URL's own) and :data:`PLAIN`."""
    base, _, fragment = viewer_url.partition("#!")
    doc = state if state is not None else json.loads(urllib.parse.unquote(fragment))
    return base + "#!" + urllib.parse.quote(json.dumps(dict(doc, **PLAIN)))


def drawn_fraction(png: bytes) -> float:
    """The fraction of pixels of the screenshot's central half (both axes) that differ from
    its median colour by more than 40 (sum over RGB): geometry, the UI being at the edges."""
    from PIL import Image

    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    h, w = img.shape[:2]
    centre = img[h // 4 : 3 * h // 4, w // 4 : 3 * w // 4]
    background = np.median(centre.reshape(-1, 3), axis=0)
    return float(np.mean(np.abs(centre - background).sum(axis=2) > 40))


_COUNTED = ("Network.requestWillBeSent", "Network.loadingFinished", "Network.loadingFailed")


async def _release_workers(page: Any, attached: set[str]) -> None:
    """Every newly attached worker: Network enabled, then resumed (raw commands with the
    worker's sessionId; their replies are not awaited)."""
    for e in list(page.events):
        if e["method"] != "Target.attachedToTarget":
            continue
        sid = e["params"]["sessionId"]
        if sid in attached:
            continue
        attached.add(sid)
        for method in ("Network.enable", "Runtime.runIfWaitingForDebugger"):
            page.next_id += 1
            await page.ws.send_str(json.dumps({"id": page.next_id, "method": method, "sessionId": sid}))


async def first_view(
    page: Any, url: str, source_prefix: str, *, idle: float = 2.0, timeout: float = 120, drawn: float = 0.01
) -> dict[str, Any]:
    """Open ``url`` on ``page`` (a ``tests._cdp.Page``) and measure its first view.

    Returns ``seconds_to_drawn`` (navigation to the first screenshot whose
    :func:`drawn_fraction` exceeds ``drawn``; None if none did), ``seconds_to_idle``
    (navigation to the last change seen in the network activity of ``source_prefix`` URLs,
    polled every 0.25 s, once nothing changed for ``idle`` s), ``requests`` and ``bytes``
    (encoded body bytes received) of those URLs, ``png`` (the last screenshot)."""
    await page.send("Network.enable")
    # Neuroglancer fetches in web workers: attach to each paused at its start, enable its
    # Network domain, then let it run (its events come with the page's, with a sessionId)
    await page.send("Target.setAutoAttach", autoAttach=True, waitForDebuggerOnStart=True, flatten=True)
    await page.send("Page.navigate", url="about:blank")
    await asyncio.sleep(0.5)
    page.events.clear()
    start = time.perf_counter()
    await page.send("Page.navigate", url=url)
    to_drawn: float | None = None
    png = b""
    seen, changed = -1, start
    attached: set[str] = set()
    while time.perf_counter() - start < timeout:
        await _release_workers(page, attached)
        if to_drawn is None:
            try:
                png = await page.screenshot()
            except RuntimeError:  # the new page is not attached yet
                await asyncio.sleep(0.1)
                continue
            if drawn_fraction(png) > drawn:
                to_drawn = time.perf_counter() - start
        else:
            await asyncio.sleep(0.25)
        count = sum(1 for e in page.events if e["method"] in _COUNTED)
        if count != seen:
            seen, changed = count, time.perf_counter()
        elif time.perf_counter() - changed > idle and to_drawn is not None:
            break
    png = await page.screenshot()
    ids = {
        e["params"]["requestId"]
        for e in page.events
        if e["method"] == "Network.requestWillBeSent"
        and e["params"]["request"]["url"].startswith(source_prefix)
    }
    size = sum(
        int(e["params"].get("encodedDataLength", 0))
        for e in page.events
        if e["method"] == "Network.loadingFinished" and e["params"]["requestId"] in ids
    )
    return {
        "seconds_to_drawn": to_drawn,
        "seconds_to_idle": changed - start,
        "requests": len(ids),
        "bytes": size,
        "png": png,
    }
