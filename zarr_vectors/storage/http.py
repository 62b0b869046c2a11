"""Bounded reads from a web server: one GET, never more bytes than the caller can expect.

:func:`bounded_get` reads one key (or a byte range of it) over an aiohttp session and refuses,
with :class:`~zarr_vectors.errors.StoreError`, an answer that is longer than it may be: a
``Content-Length`` over the limit is refused before its body is read, and a body without one
is read at most ``limit + 1`` bytes (an endless body costs ``limit`` bytes of memory, no more).
The limit is the length asked for when the server answers a range (``206``), else the largest
object the caller accepts (storage option ``zv_max_object_bytes``). A body shorter than its
``Content-Length`` is aiohttp's ``ClientPayloadError`` and one longer breaks the connection's
next answer (``ClientResponseError``); the caller turns both into StoreError.

:func:`page_links` reads the links of a directory page (nginx ``autoindex``, Apache
``Indexes``, ``python -m http.server``), whose size is bounded by :data:`MAX_PAGE_BYTES`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urljoin

from zarr_vectors.errors import StoreError

__all__ = ["DEFAULT_MAX_OBJECT_BYTES", "MAX_PAGE_BYTES", "bounded_get", "page_links", "range_header"]

#: Largest object (or answer to a range the server did not honour) read over HTTP by default.
DEFAULT_MAX_OBJECT_BYTES = 1 << 30
#: Largest directory page read (a page of a million keys is about 100 MB: no store needs that).
MAX_PAGE_BYTES = 32 << 20
#: Bytes asked of the connection at once while a body is read.
READ_CHUNK = 1 << 20

_HREF = re.compile(rb"""<a\s[^>]*?href\s*=\s*["']([^"'<>]*)["']""", re.IGNORECASE)
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$")


def range_header(start: int, length: int | None) -> str | None:
    """The ``Range`` header of a :data:`~zarr_vectors.storage.protocol.ByteRange` (None: the whole object)."""
    if start < 0:
        return f"bytes={start}"
    if length is not None:
        return f"bytes={start}-{start + length - 1}"
    return f"bytes={start}-" if start else None


def _partial_limit(start: int, length: int | None, limit: int) -> int:
    """Bytes a ``206`` answer to the range may hold at most."""
    if start < 0:
        return min(-start, limit)
    return min(length, limit) if length is not None else limit


def _check_content_range(value: str | None, start: int, cap: int, where: tuple[str, str]) -> None:
    """A ``Content-Range`` that names another range than the one asked for is refused."""
    if value is None:
        return
    match = _CONTENT_RANGE.match(value.strip())
    first = int(match.group(1)) if match else -1
    last = int(match.group(2)) if match else -1
    total = match.group(3) if match else "*"
    ok = match is not None and first <= last and last - first < cap
    if ok and start >= 0:
        ok = first == start
    elif ok and total != "*":
        ok = last == int(total) - 1  # a suffix ends at the object's end
    if not ok:
        raise StoreError(*where, f"the server answered the wrong range (Content-Range {value!r})")


async def _read_at_most(content: Any, cap: int, where: tuple[str, str], what: str) -> bytes:
    """The whole body from ``content`` (an aiohttp stream), refused once it runs past ``cap`` bytes."""
    parts: list[bytes] = []
    total = 0
    while True:
        chunk = await content.read(min(READ_CHUNK, cap + 1 - total))
        if not chunk:
            return b"".join(parts)
        total += len(chunk)
        if total > cap:
            raise StoreError(
                *where, f"the answer runs past {cap} bytes, more than {what}; refusing to read on"
            )
        parts.append(chunk)


async def _read_prefix(content: Any, n: int) -> bytes:
    """The first ``n`` bytes of the body from ``content`` (fewer when it ends before); the rest
    is left unread (aiohttp then closes the connection instead of reusing it)."""
    parts: list[bytes] = []
    total = 0
    while total < n:
        chunk = await content.read(min(READ_CHUNK, n - total))
        if not chunk:
            break
        total += len(chunk)
        parts.append(chunk)
    return b"".join(parts)


async def bounded_get(
    session: Any,
    url: Any,
    start: int,
    length: int | None,
    limit: int,
    options: Mapping[str, Any],
    where: tuple[str, str],
) -> bytes | None:
    """The bytes of ``url`` (``start``, ``length`` as in a ByteRange; None when the server says
    404), read through aiohttp ``session`` with the request ``options`` (fsspec's client
    keywords, headers among them). ``where`` is ``(store, key)`` for the error. A server that
    ignores the range and sends the whole object is read up to the range's end (at most
    ``limit`` bytes for a suffix or an open range) and cut."""
    if length == 0:
        return b""
    headers = dict(options.get("headers") or {})
    asked = range_header(start, length)
    if asked is not None:
        headers["Range"] = asked
    kwargs = {k: v for k, v in options.items() if k != "headers"}
    async with session.get(url, headers=headers, **kwargs) as resp:
        if resp.status == 404:
            return None
        if resp.status not in (200, 203, 206):
            raise StoreError(*where, f"the server answered HTTP {resp.status} {resp.reason or ''}".rstrip())
        if resp.status == 206 and asked is None:
            raise StoreError(
                *where, "the server answered part of the object (HTTP 206) to a request for all of it"
            )
        partial = resp.status == 206
        if not partial and start >= 0 and length is not None:  # the range ignored: read to its end
            return (await _read_prefix(resp.content, start + length))[start:]
        cap = _partial_limit(start, length, limit) if partial else limit
        what = (
            "the range asked for"
            if partial
            else f"the {limit} bytes an object may hold (zv_max_object_bytes)"
        )
        if partial:
            _check_content_range(resp.headers.get("Content-Range"), start, cap, where)
        declared = resp.content_length
        if declared is not None and declared > cap:
            raise StoreError(
                *where, f"the answer declares {declared} bytes (Content-Length), more than {what}"
            )
        body = await _read_at_most(resp.content, cap, where, what)
    if partial or asked is None:
        return body
    if start < 0:  # the whole object: its last bytes
        return body[start:] if len(body) > -start else body
    return body[start:]


def page_links(page: bytes, folder: str) -> list[tuple[str, bool]]:
    """``(name, is_folder)`` of the links of directory page ``page`` (at URL ``folder``, ending
    in ``/``) to names directly inside it, percent-decoded; links elsewhere are left out."""
    out = []
    for raw in _HREF.findall(page):
        target = urljoin(folder, raw.decode("utf-8", "replace"))
        if not target.startswith(folder):
            continue  # the parent folder, another site
        rest = target[len(folder) :]
        is_folder = rest.endswith("/")
        rest = unquote(rest.rstrip("/"))
        if rest and "/" not in rest and "?" not in rest and "#" not in rest:
            out.append((rest, is_folder))
    return out
