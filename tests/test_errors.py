"""Bad input and corrupt stores: the error type, and a message that says what and where."""

from __future__ import annotations

import json
import pickle
import shutil
import struct
import zlib

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors import errors
from zarr_vectors.errors import (
    AttributeNotFoundError,
    CorruptCellError,
    DecodeError,
    FormatError,
    IncompleteStoreError,
    InputError,
    LevelNotFoundError,
    StoreChangedError,
    StoreError,
    StoreExistsError,
    StoreNotFoundError,
    UnknownIdError,
    ZarrVectorsError,
    check_choice,
    choice_message,
    decoding,
)


@pytest.fixture
def pts(rng):
    return rng.uniform(0, 100, (500, 3)).astype(np.float32)


@pytest.mark.parametrize(
    "change, kwargs, message",
    [
        (lambda p: p.__setitem__((3, 1), np.nan), {}, "NaN or infinite.*row 3"),
        (lambda p: p.__setitem__((7, 0), np.inf), {}, "NaN or infinite.*row 7"),
        (None, {"bounds": ([0, 0, 0], [50, 100, 100])}, "outside bounds"),
        (None, {"attributes": {"a": np.zeros(499)}}, r"attribute 'a' must have shape \(500,\)"),
        (None, {"attributes": {"bad/name": np.zeros(500)}}, "name 'bad/name' is not allowed"),
        (None, {"attributes": {"s": np.array(["x"] * 500)}}, "dtype <U1"),
        (None, {"object_ids": np.full(500, 1.5)}, "object_ids must be integers"),
        (None, {"object_ids": np.arange(499)}, r"object_ids must have shape \(500,\)"),
        (
            None,
            {"object_ids": [-1] * 250 + [2**64 - 1] * 250},
            "object_ids mix negative ids with ids above 2",
        ),
        (None, {"object_ids": [2**64] * 500}, "object_ids must fit in 64 bits"),
        (
            None,
            {"object_ids": np.arange(500), "object_attributes": {"object_id": np.arange(500)}},
            "object attribute name 'object_id' is reserved",
        ),
        (None, {"bin_shape": 30}, "whole multiple of bin_shape"),
        (None, {"chunk_shape": -1}, "chunk_shape must be positive"),
        (None, {"groups": [[0, 1]]}, "groups need object_ids"),
        (
            None,
            {"object_ids": np.zeros(500, int), "groups": [[0, 3]]},
            r"group 0 names object id 3, which no vertex has \(its 1 objects have ids 0 \.\. 0\)",
        ),
        (
            None,
            {"object_ids": np.repeat([5, 10**8], 250), "groups": {7: [5, 6]}},
            r"group 7 names object id 6, which no vertex has \(its 2 objects have ids 5 \.\. 100000000\)",
        ),
        (
            None,
            {"object_ids": np.repeat([5, 10**8], 250), "object_attributes": {"v": [1.0, 2.0, 3.0]}},
            r"object attribute 'v' has 3 rows for 2 distinct object ids \(5 \.\. 100000000\)",
        ),
        (
            None,
            {"object_ids": np.repeat([5, 10**8], 250), "object_attributes": {"v": {5: 1.0, 6: 2.0}}},
            r"object attribute 'v' names object id 6, which no vertex has",
        ),
        (None, {"channel_names": {"a": ["x"]}}, "unknown attributes"),
        (None, {"bin_shape": 0.5}, "bins per chunk"),
    ],
)
def test_bad_input_is_refused_before_anything_is_written(tmp_path, pts, change, kwargs, message):
    if change is not None:
        change(pts)
    kwargs.setdefault("chunk_shape", 25)
    with pytest.raises(InputError, match=message):
        zv.write_points(tmp_path / "s.zarr", pts, **kwargs)
    assert not (tmp_path / "s.zarr").exists()
    assert list(tmp_path.iterdir()) == []


def test_complex_positions_and_wrong_shapes(tmp_path):
    with pytest.raises(InputError, match="complex"):
        zv.write_points(tmp_path / "a.zarr", np.zeros((3, 2), complex), chunk_shape=1)
    with pytest.raises(InputError, match=r"shape \(N, D\)"):
        zv.write_points(tmp_path / "a.zarr", np.zeros(3), chunk_shape=1)


def test_existing_target_needs_overwrite_and_keeps_old_data(tmp_path, pts):
    zv.write_points(tmp_path / "s.zarr", pts, chunk_shape=25)
    with pytest.raises(StoreExistsError, match="overwrite=True"):
        zv.write_points(tmp_path / "s.zarr", pts[:10], chunk_shape=25)
    assert len(zv.open(tmp_path / "s.zarr").read()) == len(pts)
    zv.write_points(tmp_path / "s.zarr", pts[:10], chunk_shape=25, overwrite=True)
    assert len(zv.open(tmp_path / "s.zarr").read()) == 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.zarr"]  # no staging leftovers


def _store(tmp_path, pts, **kw):
    """A store of one file per cell (``shards=None``): the tests below corrupt cell files."""
    kw.setdefault("shards", None)
    kw.setdefault("chunk_shape", 50)
    kw.setdefault("bin_shape", 25)
    path = tmp_path / "s.zarr"
    zv.write_points(
        path,
        pts,
        attributes={"a": np.arange(len(pts), dtype=np.float32)},
        object_ids=np.arange(len(pts)) % 7,
        **kw,
    )
    return path


def _first_cell(path, array):
    return sorted(p for p in (path / "0" / array / "c").rglob("*") if p.is_file())[0]


def _chunk_of(path, array, cell):
    rel = cell.relative_to(path / "0" / array / "c").parts
    return ".".join(rel)  # origin is 0 in these stores, so cell == chunk


@pytest.mark.parametrize(
    "array, mangle, message",
    [
        ("vertices", lambda b: b[:-2], "vlen-bytes item claims"),
        ("vertices", lambda b: struct.pack("<II", 1, len(b) - 10) + b[8:-2], "whole number of 12-byte rows"),
        ("vertices", lambda b: b"\x02" + b[1:], "holds 2 items"),
        ("vertex_fragments", lambda b: b[:8] + b"XXXX" + b[12:], "magic"),
        ("vertex_fragments", lambda b: b[:-4] + b"\1\0\0\0", "explicit offsets|past the cell"),
        (
            "vertex_attributes/a",
            lambda b: struct.pack("<II", 1, len(b) - 12) + b[8:-4],
            "rows but vertices has",
        ),
    ],
)
def test_corrupt_cells_name_the_array_and_chunk(tmp_path, pts, array, mangle, message):
    path = _store(tmp_path, pts)
    cell = _first_cell(path, array)
    cell.write_bytes(mangle(cell.read_bytes()))
    ds = zv.open(path)
    with pytest.raises(CorruptCellError, match=message) as info:
        ds.query(bbox=([0, 0, 0], [100, 100, 100]))
    assert info.value.array == f"0/{array}"
    assert info.value.chunk == _chunk_of(path, array, cell)
    assert f"0/{array}" in str(info.value)


def test_corrupt_compressed_cell(tmp_path, pts):
    path = _store(tmp_path, pts, compression="zstd")
    cell = _first_cell(path, "vertices")
    cell.write_bytes(b"\x28\xb5\x2f\xfdgarbage")
    with pytest.raises(CorruptCellError, match=r"'0/vertices', chunk [0-9.]+: zstd"):
        zv.open(path).read()


def test_corrupt_manifest_names_object_index(tmp_path, pts):
    path = _store(tmp_path, pts)
    cell = path / "0/object_index/manifests/c/0"
    raw = bytearray(cell.read_bytes())
    raw[12 + 8 * 3] = 9  # mode byte of object 0's first block
    cell.write_bytes(bytes(raw))
    ds = zv.open(path)
    with pytest.raises(CorruptCellError, match="unknown mode 9") as info:
        ds.objects([0])
    assert info.value.array == "0/object_index/manifests"


def _edit_root(path, fn):
    doc = json.loads((path / "zarr.json").read_text())
    fn(doc["attributes"])
    (path / "zarr.json").write_text(json.dumps(doc))


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda a: a["zarr_vectors"].update(zv_version="0.8.1"), "0.8.1.*pre-0.9"),
        (lambda a: a["zarr_vectors"].update(zv_version="1.0.0"), "reads 0.9.x only"),
        (
            lambda a: a["zarr_vectors"].update(format_capabilities=["partitioned_cross_chunk_links"]),
            "pre-0.9 capability",
        ),
        (lambda a: a.pop("zarr_vectors"), "not a Zarr Vectors store"),
        (lambda a: a["zarr_vectors"].update(chunk_shape=[1, 2]), "bounds"),
        (
            lambda a: a["zarr_vectors"].update(links_convention="zigzag"),
            "zarr_vectors.links_convention must be one of 'explicit', 'implicit_sequential', "
            "'implicit_sequential_with_branches'; got 'zigzag'",
        ),
    ],
)
def test_bad_root_metadata(tmp_path, pts, edit, message):
    path = _store(tmp_path, pts)
    _edit_root(path, edit)
    with pytest.raises(FormatError, match=message):
        zv.open(path)


def test_unknown_capability_is_a_warning_and_unknown_keys_pass(tmp_path, pts):
    path = _store(tmp_path, pts)
    _edit_root(
        path, lambda a: a["zarr_vectors"].update(format_capabilities=["fragment_index", "future"], novel=1)
    )
    with pytest.warns(UserWarning, match="future"):
        ds = zv.open(path)
    assert len(ds.read()) == len(pts)


def test_pre_09_layouts_and_unknown_index_layouts_are_refused(tmp_path, pts):
    path = _store(tmp_path, pts)
    (path / "0/cross_chunk_links").mkdir()
    (path / "0/cross_chunk_links/zarr.json").write_text(
        '{"zarr_format": 3, "node_type": "group", "attributes": {}}'
    )
    with pytest.raises(FormatError, match="cross_chunk_links.*pre-0.9"):
        zv.open(path).read()
    shutil.rmtree(path / "0/cross_chunk_links")
    doc = json.loads((path / "0/object_index/zarr.json").read_text())
    doc["attributes"]["layout"] = "dense_manifests_v9"
    (path / "0/object_index/zarr.json").write_text(json.dumps(doc))
    with pytest.raises(FormatError, match="dense_manifests_v9"):
        zv.open(path).read()


def test_a_plain_zarr_v3_group_is_not_a_store(tmp_path):
    import zarr

    zarr.create_group(str(tmp_path / "g.zarr"))
    with pytest.raises(FormatError, match="not a Zarr Vectors store"):
        zv.open(tmp_path / "g.zarr")
    missing = str(tmp_path / "missing.zarr")
    for call in (zv.open, zv.validate):
        with pytest.raises(FileNotFoundError) as info:
            call(missing)
        assert isinstance(info.value, StoreNotFoundError) and isinstance(info.value, ZarrVectorsError)
        assert str(info.value) == f"no store at {missing!r}: the path does not exist; check the path"
        assert info.value.path == info.value.filename == missing


def test_a_zarr_v2_group_is_refused_with_valueerror(tmp_path):
    import zarr

    zarr.create_group(str(tmp_path / "v2.zarr"), zarr_format=2)
    with pytest.raises(ValueError, match="Zarr v2"):
        zv.open(tmp_path / "v2.zarr")


LOOKUPS = {
    "vertex attribute": (
        lambda ds: ds.query(bbox=([0] * 3, [1] * 3), attributes=["nope", "a"]),
        AttributeNotFoundError,
        "unknown vertex attribute 'nope'; level 0 has vertex attributes ['a']",
    ),
    "vertex attributes": (
        lambda ds: ds.read(attributes=["x", "y"]),
        AttributeNotFoundError,
        "unknown vertex attributes ['x', 'y']; level 0 has vertex attributes ['a']",
    ),
    "object attribute": (
        lambda ds: ds.object_attributes("volume"),
        AttributeNotFoundError,
        "unknown object attribute 'volume'; level 0 has no object attributes",
    ),
    "group attribute": (
        lambda ds: ds.group_attributes("size"),
        AttributeNotFoundError,
        "unknown group attribute 'size'; level 0 has no group attributes",
    ),
    "level": (
        lambda ds: ds.query(bbox=([0] * 3, [1] * 3), level=3),
        LevelNotFoundError,
        "level 3 does not exist; this store has levels [0]",
    ),
    "level of an attribute": (
        lambda ds: ds.object_attributes("volume", level=1),
        LevelNotFoundError,
        "level 1 does not exist; this store has levels [0]",
    ),
    "object id": (lambda ds: ds.objects([99]), UnknownIdError, "object id 99 is not in level 0"),
}


@pytest.mark.parametrize("what", sorted(LOOKUPS))
def test_lookups_of_what_the_store_lacks_are_library_errors_and_key_errors(tmp_path, pts, what):
    """Each is caught as the library's base, as ValueError (the base's base) and as KeyError;
    its text is the message, unquoted (KeyError alone would quote it)."""
    ds = zv.open(_store(tmp_path, pts))
    call, kind, message = LOOKUPS[what]
    for caught in (kind, ZarrVectorsError, ValueError, KeyError):
        with pytest.raises(caught) as info:
            call(ds)
        assert type(info.value) is kind
        assert str(info.value).startswith(message), str(info.value)


def test_lookup_errors_carry_what_was_asked(tmp_path, pts):
    ds = zv.open(_store(tmp_path, pts))
    with pytest.raises(AttributeNotFoundError) as info:
        ds.read(attributes=["a", "nope"])
    assert (info.value.kind, info.value.names, info.value.level, info.value.available) == (
        "vertex",
        ["nope"],
        0,
        ["a"],
    )
    with pytest.raises(LevelNotFoundError) as level:
        ds.level(2)
    assert (level.value.level, level.value.levels) == (2, [0])


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda p: zv.open(p, mode="w"),
            "mode must be one of 'r', 'r+'; got 'w'; write new stores with write_points() etc.",
        ),
        (lambda p: zv.open(12345), "cannot open a store from int; give a path, URL or zarr Store"),
        (
            lambda p: zv.write_points(
                p.parent / "n.zarr", np.zeros((2, 3)), chunk_shape=1, compression="snappy"
            ),
            "compression must be one of 'none', 'zstd', 'gzip', 'blosc', 'blosc-bitshuffle', 'bz2', 'lz4', "
            "'lzma', 'zlib'; got 'snappy' (or numcodecs.<id> for numcodecs' own blosc, bz2, gzip, lz4, lzma, "
            "zlib, zstd)",
        ),
        (lambda p: zv.validate(p, level=9), "level must be an integer from 1 to 5, got 9"),
        (lambda p: zv.open(p).read().subset(np.ones(3, bool)), "mask must have shape (500,), got (3,)"),
    ],
)
def test_bad_arguments_are_input_errors(tmp_path, pts, call, message):
    path = _store(tmp_path, pts)
    with pytest.raises(InputError) as info:
        call(path)
    assert str(info.value) == message


# ------------------------------------------------------------------ the hierarchy itself


def test_every_class_derives_from_the_base_and_pickles(tmp_path):
    made = [
        CorruptCellError("0/vertices", "1.2.3", "bad bytes"),
        StoreError("s3://b/x.zarr", "0/vertices/c/1", "timed out"),
        StoreChangedError("s3://b/x.zarr"),
        IncompleteStoreError("s3://b/x.zarr"),
        StoreNotFoundError("/no/such.zarr"),
        LevelNotFoundError(4, [0, 1]),
        AttributeNotFoundError("group", ["g"], 1, ["h", "f"]),
        UnknownIdError("object id 7 is not in level 0"),
    ]
    for exc in made:
        assert isinstance(exc, ZarrVectorsError) and isinstance(exc, ValueError)
        again = pickle.loads(pickle.dumps(exc))  # errors cross process pools whole
        assert type(again) is type(exc) and str(again) == str(exc) and vars(again) == vars(exc)
    assert str(made[6]) == "unknown group attribute 'g'; level 1 has group attributes ['f', 'h']"
    public = {
        name
        for name in errors.__all__
        if isinstance(getattr(errors, name), type) and not name.endswith("Warning")
    }
    assert all(issubclass(getattr(errors, name), ZarrVectorsError) for name in public)


def test_check_choice():
    assert check_choice("kind", "b", ("a", "b")) == "b"
    with pytest.raises(InputError) as info:
        check_choice("kind", "c", ["a", "b"])
    assert str(info.value) == "kind must be one of 'a', 'b'; got 'c'"
    with pytest.raises(FormatError, match=r"^0/links: store must be one of 'x'; got 3; see the spec$"):
        check_choice("0/links: store", 3, ("x",), error=FormatError, hint="see the spec")
    with pytest.raises(InputError, match=r"got array\(\[1, 2\]\)"):  # compared element by element
        check_choice("kind", np.array([1, 2]), ("a", "b"))
    with pytest.raises(InputError, match="got \\[1\\]"):  # unhashable, against a set
        check_choice("kind", [1], {"a"})
    assert choice_message("x", None, ()) == "x must be one of ; got None"


@pytest.mark.parametrize(
    "raised, reason",
    [
        (DecodeError("header is short"), "object 3: header is short"),
        (struct.error("unpack requires a buffer of 8 bytes"), "object 3: struct.error: unpack requires"),
        (zlib.error("invalid stored block lengths"), "object 3: zlib.error: invalid stored block"),
        (ValueError("buffer size must be a multiple"), "object 3: ValueError: buffer size must"),
        (EOFError("Compressed file ended"), "object 3: EOFError: Compressed file ended"),
        (b"\xff".decode, "object 3: an element is not UTF-8 (invalid start byte)"),
    ],
)
@pytest.mark.parametrize(
    "chunk, key", [((2, 0, 1), "2.0.1"), (np.array([4, 5]), "4.5"), (7, "7"), ("1.1", "1.1")]
)
def test_decoding_names_the_array_and_chunk(raised, reason, chunk, key):
    with pytest.raises(CorruptCellError) as info:
        with decoding("0/vertices", chunk, "object 3"):
            raised() if callable(raised) else _raise(raised)
    assert (info.value.array, info.value.chunk) == ("0/vertices", key)
    assert info.value.reason.startswith(reason), info.value.reason
    assert str(info.value).startswith(f"corrupt cell in array '0/vertices', chunk {key}: {reason}")
    assert info.value.__cause__ is not None


def _raise(exc):
    raise exc


@pytest.mark.parametrize(
    "exc",
    [
        CorruptCellError("0/links/0", "1", "x"),
        StoreError("s", "k", "r"),
        KeyError("k"),
        TypeError("t"),
        MemoryError("out of memory"),
    ],
)
def test_decoding_passes_other_errors_through(exc):
    with pytest.raises(type(exc)) as info:
        with decoding("0/vertices", (0, 0, 0)):
            raise exc
    assert info.value is exc
    with decoding("0/vertices", 0):  # nothing raised: nothing happens
        pass


# ------------------------------------------------------------------ transposed positions


def _writers(pos):
    """Every writer called with ``pos`` (its other arguments matching ``len(pos)`` rows)."""
    n = len(pos)
    chain = np.arange(-1, n - 1)
    return {
        "points": lambda p, **kw: zv.write_points(p, pos, **kw),
        "lines": lambda p, **kw: zv.write_lines(p, [pos], **kw),
        "lines (positions, offsets)": lambda p, **kw: zv.write_lines(p, (pos, np.array([0, n])), **kw),
        "skeleton": lambda p, **kw: zv.write_skeleton(p, pos, chain, **kw),
        "graph": lambda p, **kw: zv.write_graph(p, pos, np.array([[0, 1]]), **kw),
    }


@pytest.mark.parametrize("writer", sorted(_writers(np.zeros((3, 3)))))
@pytest.mark.parametrize(
    "n, hint",
    [
        (50, {}),
        (8, {"chunk_shape": [25, 25, 25]}),
        (8, {"axes": ["x", "y", "z"]}),
        (8, {"bounds": ([0, 0, 0], [100, 100, 100])}),
    ],
)
def test_transposed_positions_are_refused_with_the_fix(tmp_path, rng, writer, n, hint):
    """(3, N) input: refused, suggesting positions.T, whether N is large or the call says D = 3."""
    pos = rng.uniform(0, 100, (n, 3))
    hint = {"chunk_shape": 25, **hint}
    for_t = _writers(pos.T)[writer]
    message = (
        rf"line 0 has shape \(3, {n}\), one row per axis.*pass \[line\.T for line in lines\]"
        if writer == "lines"
        else rf"shape \(3, {n}\), which reads as 3 points in {n} dimensions.*"
        rf"look transposed.*pass positions\.T, of shape \({n}, 3\)"
    )
    with pytest.raises(InputError, match=message):
        for_t(tmp_path / "s.zarr", **hint)
    assert list(tmp_path.iterdir()) == []
    ds = _writers(pos)[writer](tmp_path / "s.zarr", **hint)  # the suggested fix writes
    assert ds.vertex_count() == n


def test_transposed_lines_and_meshes_are_refused_with_the_fix(tmp_path, rng):
    lines = [rng.uniform(0, 10, (k, 3)).T for k in (5, 6, 30)]
    with pytest.raises(InputError, match=r"line 0 has shape \(3, 5\).*pass \[line\.T for line in lines\]"):
        zv.write_lines(tmp_path / "l.zarr", lines, chunk_shape=5)
    v = rng.uniform(0, 10, (6, 3))
    faces = np.array([[0, 1, 2], [3, 4, 5]])
    with pytest.raises(InputError, match=r"vertices have shape \(3, 6\).*pass vertices\.T"):
        zv.write_mesh(tmp_path / "m.zarr", v.T, faces, chunk_shape=5)
    with pytest.raises(
        InputError, match=r"mesh 0: vertices must be \(N, 3\), got \(3, 6\).*pass vertices\.T"
    ):
        zv.write_meshes(tmp_path / "m.zarr", [(v.T, faces)], chunk_shape=5)
    assert list(tmp_path.iterdir()) == []


def test_small_inputs_that_fit_either_way_are_taken_as_given(tmp_path, rng):
    """(3, 5) without a dimension hint is 3 points in 5-D; (4, 3) is 4 points in 3-D."""
    ds = zv.write_points(tmp_path / "a.zarr", rng.uniform(0, 10, (3, 5)), chunk_shape=5)
    assert (ds.vertex_count(), ds.ndim) == (3, 5)
    ds = zv.write_points(tmp_path / "b.zarr", rng.uniform(0, 10, (4, 3)), chunk_shape=[5, 5, 5])
    assert (ds.vertex_count(), ds.ndim) == (4, 3)


# ------------------------------------------------------------------ boxes with lo > hi


def test_box_with_lo_above_hi_names_the_axis_on_every_query_path(tmp_path, pts):
    import shapely

    ds = zv.open(_store(tmp_path, pts))
    bad = ([0, 60, 0], [100, 40, 100])
    message = r"bbox has lo > hi on axis 1 \(y\): 60 > 40; give the low corner first"
    with pytest.raises(InputError, match=message):
        ds.query(bad)
    with pytest.raises(InputError, match=message):
        ds.query(bad, polygon=shapely.box(0, 0, 50, 50), polygon_axes=("x", "y"))
    with pytest.raises(InputError, match=message):
        ds.level_for(max_vertices=10, bbox=bad)
    assert len(ds.query(([0, 40, 0], [100, 40, 100]))) == int(np.sum(pts[:, 1] == np.float32(40)))  # lo == hi


def test_polygon_beside_the_box_is_an_empty_result_not_an_error(tmp_path, pts):
    import shapely

    ds = zv.open(_store(tmp_path, pts))
    res = ds.query(([0, 0, 0], [50, 50, 100]), polygon=shapely.box(60, 60, 90, 90), polygon_axes=("x", "y"))
    assert len(res) == 0
    res = ds.query(([60, 60, 0], [90, 90, 100]), polygon=shapely.box(0, 0, 50, 50), polygon_axes=("x", "y"))
    assert len(res) == 0


def test_every_warning_class_derives_from_the_base_and_lives_beside_the_errors() -> None:
    """A warning class defined anywhere but ``errors.py`` fails, and so does one in
    ``errors.py`` that a ``ZarrVectorsWarning`` filter would not catch."""
    import ast
    from pathlib import Path

    import zarr_vectors
    from zarr_vectors import errors

    package = Path(zarr_vectors.__file__).parent
    elsewhere = [
        f"{path.relative_to(package)}: {node.name}"
        for path in package.rglob("*.py")
        if path.name != "errors.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and node.name.endswith("Warning")
    ]
    assert not elsewhere, elsewhere
    names = [n for n in errors.__all__ if n.endswith("Warning")]
    assert len(names) >= 8
    for name in names:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.ZarrVectorsWarning) and issubclass(cls, UserWarning), name
        assert getattr(zarr_vectors, name) is cls, f"zarr_vectors.{name} is not exported"
