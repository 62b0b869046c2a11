"""One wording for every "install this" hint: the distribution is ``zarrvec``, installed from
PyPI or, as the README does, from a checkout."""

from __future__ import annotations

__all__ = ["EXTRAS", "install_hint", "needs"]

#: Optional features and the extra that brings each (pyproject's ``optional-dependencies``).
EXTRAS = (
    "plot",
    "geo",
    "tractography",
    "pyramid",
    "s3",
    "dask",
    "icechunk",
    "dataframe",
    "las",
    "csv",
    "neuroglancer",
)


def install_hint(extra: str | None) -> str:
    """Both ways to get ``extra`` (None: the package itself, e.g. its Draco codec)."""
    if extra is None:
        return "reinstall the package: pip install zarrvec, or pip install -e . from a checkout"
    return (
        f"install the {extra!r} extra: pip install 'zarrvec[{extra}]', "
        f'or pip install -e ".[{extra}]" from a checkout'
    )


def needs(what: str, package: str, extra: str | None) -> str:
    """``"<what> needs <package>; install the ... extra: ..."``."""
    return f"{what} needs {package}; {install_hint(extra)}"
