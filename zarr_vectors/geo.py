"""Coordinate reference systems and the GeoZarr ``proj:`` / ``spatial:`` conventions.

A store's CRS is the Zarr Vectors root ``crs`` block. This library writes it as a
dict holding the GeoZarr ``proj:`` properties the user gave (at least one of
``proj:code``, ``proj:wkt2``, ``proj:projjson``), and mirrors it on the root group
as the GeoZarr conventions: the same ``proj:*`` keys, ``spatial:dimensions`` (the
space axis names) and ``spatial:bbox`` (the Zarr Vectors ``bounds``, lo corner then hi
corner), declared in ``zarr_conventions``. A dict in any other shape is an opaque
record (the spec allows that) and gets no GeoZarr attributes.

Parsing needs no third-party package; when :mod:`pyproj` is installed it also checks
that PROJ knows the CRS. Everything here is pure (JSON in, JSON out).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from zarr_vectors._extras import needs
from zarr_vectors.errors import InputError

__all__ = [
    "CRS",
    "PROJ_CONVENTION",
    "SPATIAL_CONVENTION",
    "parse_crs",
    "crs_block",
    "crs_view",
    "geozarr_attributes",
    "check_geozarr",
]

#: ``zarr_conventions`` entry of the GeoZarr geo-proj convention.
PROJ_CONVENTION: dict[str, str] = {
    "uuid": "f17cb550-5864-4468-aeb7-f3180cfb622f",
    "schema_url": "https://raw.githubusercontent.com/zarr-experimental/geo-proj/refs/tags/v1/schema.json",
    "spec_url": "https://github.com/zarr-experimental/geo-proj/blob/v1/README.md",
    "name": "proj:",
    "description": "Coordinate reference system information for geospatial data",
}
#: ``zarr_conventions`` entry of the GeoZarr spatial convention.
SPATIAL_CONVENTION: dict[str, str] = {
    "uuid": "689b58e2-cf7b-45e0-9fff-9cfc0883d6b4",
    "schema_url": "https://raw.githubusercontent.com/zarr-conventions/spatial/refs/tags/v1/schema.json",
    "spec_url": "https://github.com/zarr-conventions/spatial/blob/v1/README.md",
    "name": "spatial:",
    "description": "Spatial coordinate information",
}

PROJ_KEYS = ("proj:code", "proj:wkt2", "proj:projjson")
_CODE_RE = re.compile(r"^([A-Za-z]+):{1,2}([0-9]+)$")
_URN_RE = re.compile(r"^urn:ogc:def:crs:([A-Za-z]+):[^:]*:([0-9]+)$", re.IGNORECASE)
_URL_RE = re.compile(r"^https?://www\.opengis\.net/def/crs/([A-Za-z]+)/[^/]+/([0-9]+)$", re.IGNORECASE)
_WKT2_KEYWORDS = (
    "GEOGCRS",
    "GEOGRAPHICCRS",
    "GEODCRS",
    "GEODETICCRS",
    "PROJCRS",
    "PROJECTEDCRS",
    "VERTCRS",
    "VERTICALCRS",
    "COMPOUNDCRS",
    "ENGCRS",
    "ENGINEERINGCRS",
    "BOUNDCRS",
    "DERIVEDPROJCRS",
    "PARAMETRICCRS",
    "TIMECRS",
    "IMAGECRS",
)
_WKT1_KEYWORDS = ("GEOGCS", "PROJCS", "GEOCCS", "VERT_CS", "COMPD_CS", "LOCAL_CS", "FITTED_CS")
_PROJJSON_TYPES = frozenset(
    {
        "GeographicCRS",
        "GeodeticCRS",
        "ProjectedCRS",
        "CompoundCRS",
        "VerticalCRS",
        "BoundCRS",
        "EngineeringCRS",
        "ParametricCRS",
        "TemporalCRS",
        "DerivedGeographicCRS",
        "DerivedGeodeticCRS",
        "DerivedProjectedCRS",
        "DerivedVerticalCRS",
        "DerivedEngineeringCRS",
        "DerivedParametricCRS",
        "DerivedTemporalCRS",
    }
)


def _pyproj() -> ModuleType | None:
    """:mod:`pyproj` when installed (extra ``geo``), else None."""
    if importlib.util.find_spec("pyproj") is None:
        return None
    return importlib.import_module("pyproj")


class CRS(dict[str, Any]):
    """A CRS as stored: a dict of GeoZarr ``proj:`` properties (a plain dict to JSON and ``==``).

    At least one of ``proj:code`` (``"EPSG:32633"``), ``proj:wkt2`` and ``proj:projjson``
    is present. Build one with :func:`parse_crs`; :attr:`zarr_vectors.Dataset.crs`
    returns one.

    Examples
    --------
    >>> from zarr_vectors.geo import parse_crs
    >>> crs = parse_crs("EPSG:32633")
    >>> crs
    CRS('EPSG:32633')
    >>> crs == {"proj:code": "EPSG:32633"}, crs.code, crs.wkt2
    (True, 'EPSG:32633', None)
    """

    @property
    def code(self) -> str | None:
        """``AUTHORITY:CODE`` when known (given, or the top-level ID of the WKT2 / PROJJSON)."""
        return self.get("proj:code")

    @property
    def wkt2(self) -> str | None:
        """The WKT2 text when stored (``proj:wkt2``), else None."""
        return self.get("proj:wkt2")

    @property
    def projjson(self) -> dict[str, Any] | None:
        """The PROJJSON object when stored (``proj:projjson``), else None."""
        return self.get("proj:projjson")

    def to_pyproj(self) -> Any:
        """The CRS as a ``pyproj.CRS`` (needs pyproj, from the ``geo`` extra), built from the
        PROJJSON, else the WKT2, else the code.

        Returns
        -------
        pyproj.CRS

        Raises
        ------
        InputError
            pyproj is not installed.

        Examples
        --------
        >>> from zarr_vectors.geo import parse_crs
        >>> utm = parse_crs("EPSG:32633").to_pyproj()
        >>> utm.name, utm.to_epsg()
        ('WGS 84 / UTM zone 33N', 32633)
        """
        pyproj = _pyproj()
        if pyproj is None:
            raise InputError(needs("CRS.to_pyproj", "pyproj", "geo"))
        if self.projjson is not None:
            return pyproj.CRS.from_json_dict(self.projjson)
        if self.wkt2 is not None:
            return pyproj.CRS.from_wkt(self.wkt2)
        return pyproj.CRS.from_user_input(self.code)

    def __repr__(self) -> str:
        if self.code is not None:
            return f"CRS({self.code!r})"
        name = (self.projjson or {}).get("name") if self.projjson else None
        return f"CRS(<{'PROJJSON' if self.projjson is not None else 'WKT2'}{f' {name!r}' if name else ''}>)"


def _normal_code(text: str) -> str | None:
    """``AUTHORITY:CODE`` from ``EPSG:4326``, ``epsg::4326``, an OGC URN or an opengis.net URL."""
    for pattern in (_CODE_RE, _URN_RE, _URL_RE):
        m = pattern.match(text.strip())
        if m:
            return f"{m.group(1).upper()}:{int(m.group(2))}"
    return None


def _wkt_top_id(wkt: str) -> str | None:
    """Check the brackets and quotes of a WKT string; return its top-level ``ID["AUTH",code]``.

    Raises InputError when brackets do not balance or a quote is left open.
    """
    depth, i, n, found = 0, 0, len(wkt), None
    while i < n:
        ch = wkt[i]
        if ch == '"':
            end = i + 1
            while True:  # WKT escapes a quote by doubling it
                end = wkt.find('"', end)
                if end < 0:
                    raise InputError("the WKT2 string has an unterminated quoted name")
                if end + 1 < n and wkt[end + 1] == '"':
                    end += 2
                    continue
                break
            i = end + 1
            continue
        if ch in "[(":
            if depth == 1:
                m = re.search(r"(?:^|[\s,\[(])(?:ID|AUTHORITY)\s*$", wkt[max(0, i - 12) : i], re.IGNORECASE)
                if m:
                    inner = re.match(r'[\[(]\s*"([^"]+)"\s*,\s*"?([0-9]+)"?', wkt[i:])
                    if inner:
                        found = f"{inner.group(1).upper()}:{int(inner.group(2))}"
            depth += 1
        elif ch in "])":
            depth -= 1
            if depth < 0:
                raise InputError("the WKT2 string has more closing than opening brackets")
        i += 1
    if depth != 0:
        raise InputError("the WKT2 string has unbalanced brackets")
    return found


def _from_text(text: str) -> CRS:
    stripped = text.strip()
    code = _normal_code(stripped)
    if code is not None:
        return CRS({"proj:code": code})
    if stripped.startswith("{"):
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise InputError(f"crs looks like PROJJSON but is not valid JSON ({exc})") from exc
        return _from_projjson(value)
    keyword = re.match(r"^([A-Za-z_]+)\s*[\[(]", stripped)
    if keyword and keyword.group(1).upper() in _WKT2_KEYWORDS:
        found = _wkt_top_id(stripped)
        out = CRS({"proj:wkt2": stripped})
        if found and re.match(r"^[A-Z]+:[0-9]+$", found):
            out["proj:code"] = found
        return out
    if keyword and keyword.group(1).upper() in _WKT1_KEYWORDS:
        raise InputError(
            f"crs is WKT1 ({keyword.group(1)}[...]); give WKT2 (ISO 19162), an EPSG code such as "
            "'EPSG:4326', or PROJJSON (pyproj: CRS.from_wkt(text).to_wkt() converts WKT1 to WKT2)"
        )
    shown = stripped if len(stripped) <= 60 else stripped[:57] + "..."
    raise InputError(
        f"unknown CRS {shown!r}: give an authority code such as 'EPSG:4326', a WKT2 string or PROJJSON"
    )


def _from_projjson(value: Any) -> CRS:
    if not isinstance(value, Mapping) or value.get("type") not in _PROJJSON_TYPES:
        kind = value.get("type") if isinstance(value, Mapping) else type(value).__name__
        raise InputError(f"crs is not PROJJSON of a CRS (its type is {kind!r}; expected e.g. 'ProjectedCRS')")
    out = CRS({"proj:projjson": dict(value)})
    ident = value.get("id")
    if isinstance(ident, Mapping) and "authority" in ident and "code" in ident:
        code = f"{str(ident['authority']).upper()}:{ident['code']}"
        if re.match(r"^[A-Z]+:[0-9]+$", code):
            out["proj:code"] = code
    return out


def _from_block(value: Mapping[str, Any]) -> CRS:
    """A dict already holding ``proj:`` keys: check each one."""
    out = CRS()
    if "proj:code" in value:
        code = value["proj:code"]
        norm = _normal_code(code) if isinstance(code, str) else None
        if norm is None:
            raise InputError(f"proj:code {code!r} is not an authority code such as 'EPSG:4326'")
        out["proj:code"] = norm
    if "proj:wkt2" in value:
        out["proj:wkt2"] = _from_text(str(value["proj:wkt2"]))["proj:wkt2"]
    if "proj:projjson" in value:
        out["proj:projjson"] = _from_projjson(value["proj:projjson"])["proj:projjson"]
    return out


def _from_pyproj_object(value: Any) -> CRS:
    """A ``pyproj.CRS`` (or any object with ``to_authority``/``to_json_dict``): its exact
    authority code when PROJ finds one with full confidence, else its PROJJSON."""
    auth = value.to_authority(min_confidence=100)
    if auth is not None and re.match(r"^[A-Za-z]+$", auth[0]) and str(auth[1]).isdigit():
        return CRS({"proj:code": f"{auth[0].upper()}:{int(auth[1])}"})
    return _from_projjson(value.to_json_dict())


def _check_with_pyproj(crs: CRS, given: Any) -> None:
    """When pyproj is installed, make sure PROJ understands every form of ``crs``."""
    pyproj = _pyproj()
    if pyproj is None:
        return
    shown = given if not isinstance(given, str) or len(given) <= 60 else given[:57] + "..."
    try:
        if crs.code is not None:
            pyproj.CRS.from_user_input(crs.code)
        if crs.wkt2 is not None:
            pyproj.CRS.from_wkt(crs.wkt2)
        if crs.projjson is not None:
            pyproj.CRS.from_json_dict(crs.projjson)
    except pyproj.exceptions.CRSError as exc:
        raise InputError(f"unknown CRS {shown!r}: PROJ does not recognise it ({exc})") from exc


def parse_crs(value: Any) -> CRS:
    """A :class:`CRS` from any of the usual ways to name one; writers' ``crs=`` goes through it.

    Parameters
    ----------
    value
        An EPSG code (``"EPSG:4326"``, ``4326``, an OGC URN or URL), a WKT2 string, PROJJSON
        (dict or text), a dict of ``proj:`` keys, or a ``pyproj.CRS``.

    Returns
    -------
    CRS

    Raises
    ------
    InputError
        Anything else, WKT1, and (when pyproj is installed) a CRS that PROJ does not know.

    Examples
    --------
    >>> from zarr_vectors.geo import parse_crs
    >>> parse_crs(4326), parse_crs("urn:ogc:def:crs:EPSG::3857")
    (CRS('EPSG:4326'), CRS('EPSG:3857'))
    >>> import pyproj
    >>> sorted(parse_crs(pyproj.CRS("EPSG:4326").to_wkt()))
    ['proj:code', 'proj:wkt2']
    """
    if isinstance(value, CRS):
        return CRS(value)
    if isinstance(value, bool):
        raise InputError(f"crs must be a CRS description, got {value!r}")
    if isinstance(value, int):
        crs = CRS({"proj:code": f"EPSG:{value}"})
    elif isinstance(value, str):
        crs = _from_text(value)
    elif isinstance(value, Mapping):
        if any(k in value for k in PROJ_KEYS):
            crs = _from_block(value)
        else:
            crs = _from_projjson(value)
    elif hasattr(value, "to_authority") and hasattr(value, "to_json_dict"):
        crs = _from_pyproj_object(value)
    else:
        raise InputError(
            f"crs must be an EPSG code, WKT2, PROJJSON or a pyproj.CRS, got {type(value).__name__}"
        )
    _check_with_pyproj(crs, value)
    return crs


def crs_block(value: Any) -> Any:
    """The root ``crs`` value to store for a writer's ``crs=`` argument.

    None stays None; a dict that is neither PROJJSON nor ``proj:`` keys is an opaque record
    and is kept unchanged (the format allows any dict); everything else goes through
    :func:`parse_crs`.
    """
    if value is None:
        return None
    opaque = (
        isinstance(value, Mapping) and not isinstance(value, CRS) and not any(k in value for k in PROJ_KEYS)
    )
    if opaque and value.get("type") not in _PROJJSON_TYPES:
        return dict(value)
    return parse_crs(value)


def crs_view(value: Any) -> Any:
    """A stored ``crs`` block as a :class:`CRS` when it holds ``proj:`` keys, else unchanged."""
    if isinstance(value, Mapping) and any(k in value for k in PROJ_KEYS):
        return CRS(value)
    return value


def geozarr_attributes(
    crs: Any, bounds: Sequence[Sequence[float]], axis_names: Sequence[str]
) -> dict[str, Any]:
    """Root attributes declaring the GeoZarr ``proj:`` and ``spatial:`` conventions.

    Empty when ``crs`` holds no ``proj:`` keys. ``spatial:bbox`` is ``bounds`` flattened
    (lo corner, then hi corner: ``[xmin, ymin, xmax, ymax]`` in 2-D);
    ``spatial:dimensions`` the space axis names in coordinate order.
    """
    if not isinstance(crs, Mapping) or not any(k in crs for k in PROJ_KEYS):
        return {}
    out: dict[str, Any] = {"zarr_conventions": [dict(PROJ_CONVENTION), dict(SPATIAL_CONVENTION)]}
    for key in PROJ_KEYS:
        if key in crs:
            out[key] = crs[key]
    out["spatial:dimensions"] = [str(a) for a in axis_names]
    out["spatial:bbox"] = [float(v) for v in bounds[0]] + [float(v) for v in bounds[1]]
    return out


def _flat_bounds(bounds: Any) -> list[float] | None:
    """``bounds`` as ``spatial:bbox`` (lo corner, then hi corner), or None when malformed."""
    if not isinstance(bounds, Sequence) or isinstance(bounds, str) or len(bounds) != 2:
        return None
    out: list[float] = []
    for corner in bounds:
        if not isinstance(corner, Sequence) or isinstance(corner, str):
            return None
        for v in corner:
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                return None
            out.append(float(v))
    return out


def _space_axis_names(multiscales: Any) -> list[Any]:
    """Names of the space axes of an NGFF ``multiscales`` list; empty when it is malformed."""
    if not isinstance(multiscales, list) or not multiscales or not isinstance(multiscales[0], Mapping):
        return []
    axes = multiscales[0].get("axes")
    if not isinstance(axes, list):
        return []
    return [a.get("name") for a in axes if isinstance(a, Mapping) and a.get("type", "space") == "space"]


def check_geozarr(attributes: Mapping[str, Any]) -> list[str]:
    """Problems with a root group's GeoZarr attributes against its Zarr Vectors block.

    Checks that both conventions are declared with their UUIDs, that every ``proj:`` key
    equals the one in ``zarr_vectors.crs``, and that ``spatial:bbox`` and
    ``spatial:dimensions`` match ``bounds`` and the space axes. An empty list means
    consistent (or not georeferenced at all). Malformed ``bounds`` or ``multiscales``
    are left to the format's own checks: the comparisons that need them are skipped.
    """
    block = attributes.get("zarr_vectors")
    if not isinstance(block, Mapping):
        block = {}
    crs = block.get("crs")
    conventions = attributes.get("zarr_conventions")
    if not isinstance(conventions, (list, tuple)):
        conventions = []
    declared = {c.get("uuid") for c in conventions if isinstance(c, Mapping)}
    has_proj = isinstance(crs, Mapping) and any(k in crs for k in PROJ_KEYS)
    if not has_proj and not any(k.startswith(("proj:", "spatial:")) for k in attributes):
        return []
    problems = []
    for conv in (PROJ_CONVENTION, SPATIAL_CONVENTION):
        if conv["uuid"] not in declared:
            problems.append(f"zarr_conventions does not declare {conv['name']} ({conv['uuid']})")
    for key in PROJ_KEYS:
        mine = crs.get(key) if isinstance(crs, Mapping) else None
        if attributes.get(key) != mine:
            problems.append(f"{key} is {attributes.get(key)!r} but zarr_vectors.crs has {mine!r}")
    want = _flat_bounds(block.get("bounds"))
    if want is not None and attributes.get("spatial:bbox") != want:
        problems.append(f"spatial:bbox is {attributes.get('spatial:bbox')!r} but bounds give {want}")
    names = _space_axis_names(attributes.get("multiscales"))
    if names and attributes.get("spatial:dimensions") != names:
        dims = attributes.get("spatial:dimensions")
        problems.append(f"spatial:dimensions is {dims!r} but the axes are {names}")
    return problems
