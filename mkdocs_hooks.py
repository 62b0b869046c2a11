"""MkDocs hook: the site's navigation is read from ``docs/index.md``.

A ``## heading`` in the index starts a section; every link to a Markdown page of the docs
folder (``[text](page.md)``, anchors allowed) adds that page, in order, once. Pages take
their title from their first heading. Links to other sites are ignored.

Docstrings use reST roles (``:class:`~zarr_vectors.errors.FormatError```), which the
Markdown renderer leaves as text; pages show them as the name in code.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

LINK = re.compile(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)")
ROLE = re.compile(r":(?:class|func|meth|mod|attr|exc|data|obj):<code>(~?)([\w.]+)</code>")


def nav_from_index(index: Path) -> list[Any]:
    """``[index.md, page, {section: [pages]}, ...]`` from the headings and links of ``index``."""
    nav: list[Any] = ["index.md"]
    seen = {"index.md"}
    current = nav
    for line in index.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            current = []
            nav.append({line[3:].strip(): current})
            continue
        for target in LINK.findall(line):
            if "://" not in target and target not in seen:
                seen.add(target)
                current.append(target)
    return [item for item in nav if not (isinstance(item, dict) and not next(iter(item.values())))]


def on_config(config: Any, **kwargs: Any) -> Any:
    if not config.get("nav"):
        config["nav"] = nav_from_index(Path(config["docs_dir"]) / "index.md")
    return config


def _role(match: re.Match[str]) -> str:
    name = match.group(2).rsplit(".", 1)[-1] if match.group(1) else match.group(2)
    return f"<code>{name}</code>"


def on_page_content(html: str, **kwargs: Any) -> str:
    return ROLE.sub(_role, html)
