"""A small Chrome DevTools Protocol driver for headless Chromium (over aiohttp's websocket
client), enough to load a page, collect console errors, evaluate and take a screenshot."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--use-angle=swiftshader",
    "--enable-unsafe-swiftshader",
    "--no-first-run",
    "--no-default-browser-check",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
]


def chromium() -> str | None:
    """Path of a Chromium binary, or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    """Chromium with a DevTools port; ``run(coro)`` drives its first page."""

    def __init__(self, width: int = 1000, height: int = 700) -> None:
        binary = chromium()
        if binary is None:
            raise RuntimeError("chromium is not installed")
        self.profile = Path(tempfile.mkdtemp(prefix="zv-chromium-"))
        cmd = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", f"--window-size={width},{height}"]
        self.proc = subprocess.Popen(
            cmd + ["about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.is_file() or not port_file.read_text().strip():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.1)
        self.port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=10) as r:
            pages = [t for t in json.load(r) if t["type"] == "page"]
        self.ws_url = pages[0]["webSocketDebuggerUrl"]

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    """One DevTools session: commands with ids, events collected in ``events``."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self.pending:
                self.pending.pop(data["id"]).set_result(data)
            elif "method" in data:
                self.events.append(data)

    async def send(self, method: str, timeout: float = 30, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = fut
        await self.ws.send_str(json.dumps({"id": self.next_id, "method": method, "params": params}))
        reply = await asyncio.wait_for(fut, timeout)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    async def evaluate(self, expression: str) -> Any:
        res = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"evaluate failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    async def screenshot(self) -> bytes:
        res = await self.send("Page.captureScreenshot", format="png")
        return base64.b64decode(res["data"])

    def console_errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries seen so far."""
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
            elif e["method"] == "Runtime.exceptionThrown":
                out.append(json.dumps(p.get("exceptionDetails", {}))[:500])
            elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(p["entry"].get("text", "") + " " + p["entry"].get("url", ""))
        return out


async def open_page(ws_url: str) -> tuple[Any, Any, Page]:
    import aiohttp

    session = aiohttp.ClientSession()
    ws = await session.ws_connect(ws_url, max_msg_size=0)
    page = Page(ws)
    for domain in ("Runtime", "Log", "Page"):
        await page.send(f"{domain}.enable")
    return session, ws, page
