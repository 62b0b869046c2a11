"""Seeded mutations of valid ``where=`` strings (issue 28, item 10).

Each case mutates a valid expression (characters inserted, deleted, replaced or repeated;
tokens swapped or inserted: operators, ``and``, dates, ``inf``, long digit runs, Unicode
digits and spaces, NUL) and parses it. The outcome must be the library's error or the right
answer, within a time bound:

* ``parse_where`` raises :class:`InputError` exactly when a reference reading of the
  grammar (a plain regular expression, fine on short text) refuses the string;
* otherwise the rows each condition keeps, on int64 / uint64 / float64 columns (``a``, ``b``, ``f``) holding the
  ends of their ranges, equal a row-by-row answer in Python numbers (integers exact, floats
  in float64); a date against a number is an ``InputError``, an unknown name
  ``AttributeNotFoundError`` (both what a query raises);
* every ``STORE_EVERY``-th case also runs through ``Dataset.read(where=...)`` of a real store.

Print the table of outcomes with ``python -m tests.fuzz.test_fuzz_where [CASES] [SEED]``.
"""

from __future__ import annotations

import math
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import zarr_vectors as zv
from zarr_vectors.engine.read.where import MAX_NUMBER_CHARS, Condition, parse_where
from zarr_vectors.errors import AttributeNotFoundError, InputError

SEED = 28
CASES = 3000
STORE_EVERY = 20
#: Seconds one case may take (parse and evaluate; the store read aside). Generous for a loaded machine.
CASE_SECONDS = 1.0

COLUMNS: dict[str, np.ndarray] = {
    "a": np.array(
        [-(2**63), -(2**63) + 1, -(2**53) - 1, -1, 0, 1, 2**53 + 1, 2**62, 2**62 + 1, 2**63 - 1], np.int64
    ),
    "b": np.array([0, 1, 2**53 + 1, 2**62, 2**62 + 1, 2**63, 2**64 - 2, 2**64 - 1, 7, 2**53], np.uint64),
    "f": np.array([-np.inf, -1.5, -0.0, 0.0, 0.5, 2.0**53, 2.0**64, np.inf, np.nan, 1e300], np.float64),
}
NAMES = [*COLUMNS, "a.b", "c"]  # the last two name no attribute
VALUES = [
    *(str(v) for v in (-(2**63), 2**63 - 1, 2**63, 2**64 - 1, 2**64, 2**62 + 1, 2**53 + 1, -1, 0, 7)),
    "0.5",
    "-1.5",
    "1e300",
    "1e400",
    "2.0",
    ".5",
    "5.",
    "+3",
    "inf",
    "-inf",
    "nan",
    "2024-01-01",
    "2024-02-30",
    "2024-01-01T12:30:00.250",
    "1500-01-01T00:00:00.123456789",  # nanoseconds cannot count 1500: numpy wraps it
    "9" * 40,
]
OPS = ["<", "<=", ">", ">=", "==", "!=", "="]
TOKENS = [
    *OPS,
    "and",
    "AND",
    " and ",
    "inf",
    "nan",
    "2024-01-01",
    "T12:00",
    "e5",
    "e",
    ".",
    "-",
    "+",
    "(",
    ")",
]
CHARS = list("0123456789.+-eE<>=! aAnNdDtT_:()\t\n") + ["\x00", "\u0663", "\u2003", "\u00e9", "\ufeff"]

# -- the reference: the grammar as one regular expression (ASCII digits; short text only) -----
_NUM = r"[-+]?(?:[0-9]+\.?[0-9]*(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?|inf|nan)"
_DAY = r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:T[0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]+)?)?)?"
_VAL = rf"{_DAY}|{_NUM}"
_NAM = r"[A-Za-z_][\w.]*"
_OPR = r"<=|>=|==|!=|<|>|="
_REF = re.compile(rf"\s*(?:({_NAM})\s*({_OPR})\s*({_VAL})|({_VAL})\s*({_OPR})\s*({_NAM}))\s*")
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def reference(text: str) -> list[tuple[str, str, str]] | None:
    """``(name, op, value text)`` of each comparison, or None where the grammar refuses."""
    out = []
    for part in re.split(r"\s+and\s+", text.strip(), flags=re.IGNORECASE):
        m = _REF.fullmatch(part)
        if m is None:
            return None
        name, op, value = (
            (m.group(1), m.group(2), m.group(3)) if m.group(1) else (m.group(6), m.group(5), m.group(4))
        )
        op = "==" if op == "=" else op
        out.append((name, op if m.group(1) else _FLIP[op], value))
    return out


def refused_when_read(text: str) -> bool:
    """Whether a value the grammar reads is still refused: an impossible date, or a number
    longer than ``MAX_NUMBER_CHARS``."""
    if re.fullmatch(_DAY, text):
        if re.search(r"\.[0-9]{10}", text):
            return True  # finer than nanoseconds
        try:
            day = np.datetime64(text)
        except (ValueError, OverflowError):
            return True
        return bool(day.astype("datetime64[D]") != np.datetime64(text[:10]))  # numpy's unit wrapped
    return len(text) > MAX_NUMBER_CHARS


def expected_rows(op: str, text: str, name: str) -> list[bool] | str:
    """The rows of column ``name`` meeting ``op text``, in Python numbers; or the name of the
    error a query gives."""
    if name not in COLUMNS:
        return "AttributeNotFoundError"
    if re.fullmatch(_DAY, text):
        return "InputError"  # a date against numbers
        return "AttributeNotFoundError"
    value: int | float = int(text) if re.fullmatch(r"[-+]?[0-9]+", text) else float(text)
    column = COLUMNS[name]
    if column.dtype.kind == "f" and isinstance(value, int) and abs(value) < 2**1024:
        value = float(value)  # a float column compares in float64 (a larger int: exactly)
    rows = column.tolist()
    compare = {
        "<": lambda x: x < value,
        "<=": lambda x: x <= value,
        ">": lambda x: x > value,
        ">=": lambda x: x >= value,
        "==": lambda x: x == value,
        "!=": lambda x: x != value,
    }[op]
    return [bool(compare(x)) and not (isinstance(x, float) and math.isnan(x) and op != "!=") for x in rows]


def actual_rows(cond: Condition) -> list[bool] | str:
    if cond.name not in COLUMNS:
        return "AttributeNotFoundError"
    column = COLUMNS[cond.name]
    try:
        cond.check_column(column.dtype, 1, "vertex")
    except InputError:
        return "InputError"
    return cond.mask(column).tolist()


# -- the cases ----------------------------------------------------------------------------------


def valid(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 3)):
        name, op, value = rng.choice(NAMES), rng.choice(OPS), rng.choice(VALUES)
        space = rng.choice(["", " ", "  "])
        parts.append(space.join([value, op, name] if rng.random() < 0.25 else [name, op, value]))
    return rng.choice([" and ", " AND ", "  and\t"]).join(parts)


def mutate(text: str, rng: random.Random) -> str:
    for _ in range(rng.randint(0, 3)):
        at = rng.randint(0, len(text))
        kind = rng.randrange(7)
        if kind == 0:
            text = text[:at] + rng.choice(CHARS) + text[at:]
        elif kind == 1:
            text = text[:at] + text[at + rng.randint(1, 4) :]
        elif kind == 2 and text:
            text = text[: min(at, len(text) - 1)] + rng.choice(CHARS) + text[min(at, len(text) - 1) + 1 :]
        elif kind == 3:
            end = min(len(text), at + rng.randint(1, 8))
            text = text[:at] + text[at:end] * rng.randint(2, 4) + text[end:]
        elif kind == 4:
            text = text[:at] + rng.choice(TOKENS) + text[at:]
        elif kind == 5:
            words = text.split(" ")
            i, j = rng.randrange(len(words)), rng.randrange(len(words))
            words[i], words[j] = words[j], words[i]
            text = " ".join(words)
        elif rng.random() < 0.3:  # a long run of digits (the quadratic case of the old pattern)
            text = text[:at] + "1" * rng.choice([200, 999, 1001, 1500]) + text[at:]
    return text


def one_case(text: str) -> str:
    """The outcome of one string: 'error: ...' or 'answer' when right; 'WRONG ...' otherwise."""
    want = reference(text)
    try:
        conditions = parse_where(text)
    except InputError as exc:
        if want is None or any(refused_when_read(v) for _, _, v in want):
            return "error: InputError (parse)"
        return f"WRONG: refused a string the grammar reads: {exc}"
    except Exception as exc:  # the outcome under test: any other exception is a failure
        return f"WRONG: {type(exc).__name__}: {exc}"
    if want is None or any(refused_when_read(v) for _, _, v in want):
        return f"WRONG: read a string the grammar refuses: {conditions}"
    outcomes = []
    for cond, (name, op, value) in zip(conditions, want, strict=True):
        try:
            got = actual_rows(cond)
        except Exception as exc:  # the outcome under test, as above
            return f"WRONG: {cond}: {type(exc).__name__}: {exc}"
        expect = expected_rows(op, value, name)
        if got != expect:
            return f"WRONG: {cond} gave {got}, expected {expect}"
        outcomes.append(got if isinstance(got, str) else "")
    errors = [o for o in outcomes if o]
    return f"error: {errors[0]} (query)" if errors else "answer"


def cases(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [mutate(valid(rng), rng) for _ in range(count)]


def run(seed: int = SEED, count: int = CASES, store: zv.Dataset | None = None) -> Counter[str]:
    table: Counter[str] = Counter()
    for i, text in enumerate(cases(seed, count)):
        start = time.perf_counter()
        outcome = one_case(text)
        seconds = time.perf_counter() - start
        if seconds > CASE_SECONDS:
            outcome = f"WRONG: {seconds:.2f} s"
        if store is not None and i % STORE_EVERY == 0:
            outcome = through_store(store, text, outcome)
        table[outcome] += 1
        if outcome.startswith("WRONG"):
            table[f"case {i}: {text[:120]!r}"] += 1
    return table


def through_store(ds: zv.Dataset, text: str, outcome: str) -> str:
    """``Dataset.read(where=text)`` must raise what ``one_case`` expected, or keep its rows."""
    try:
        rows = ds.read(where=text, attributes=["row"]).attributes["row"].ravel()
    except (InputError, AttributeNotFoundError) as exc:
        ok = outcome.startswith("error") and type(exc).__name__ in outcome
        return outcome + " [store]" if ok else f"WRONG (store): {type(exc).__name__}: {exc}"
    except Exception as exc:  # the outcome under test: the library's other errors are wrong here too
        return f"WRONG (store): {type(exc).__name__}: {exc}"
    if outcome != "answer":
        return f"WRONG (store): answered where {outcome}"
    conditions = parse_where(text)
    keep = np.ones(len(COLUMNS["a"]), bool)
    for cond in conditions:
        keep &= cond.mask(COLUMNS[cond.name])
    if sorted(rows.tolist()) != np.flatnonzero(keep).tolist():
        return f"WRONG (store): rows {sorted(rows.tolist())}, expected {np.flatnonzero(keep).tolist()}"
    return "answer [store]"


def write_store(path: Path) -> zv.Dataset:
    n = len(COLUMNS["a"])
    positions = np.column_stack([np.arange(n, dtype=np.float64), np.zeros(n)])
    attributes = {**COLUMNS, "row": np.arange(n, dtype=np.int64)}
    return zv.write_points(path, positions, chunk_shape=4.0, attributes=attributes)


def test_fuzzed_where_strings_give_the_library_error_or_the_right_answer(tmp_path: Path) -> None:
    table = run(store=write_store(tmp_path / "s.zarr"))
    print(f"\n{CASES} where= strings (seed {SEED}):")
    for outcome, count in sorted(table.items()):
        print(f"  {count:6d}  {outcome}")
    assert sum(c for o, c in table.items() if not o.startswith("case")) == CASES
    assert not [o for o in table if o.startswith(("WRONG", "case"))], table
    assert table["answer"] + table["answer [store]"] > CASES // 10  # the mutations keep many strings valid


@pytest.mark.parametrize("length", [200_000])
def test_long_fuzzed_strings_are_read_in_time(length: int) -> None:
    """Long strings built from the fuzz alphabet: each read (or refused) well inside a second."""
    rng = random.Random(SEED)
    for _ in range(20):
        pieces = [rng.choice([*TOKENS, *VALUES, *CHARS, "1" * 1000]) for _ in range(length // 4)]
        text = "".join(pieces)[:length]
        start = time.perf_counter()
        try:
            parse_where(text)
        except InputError:
            pass
        assert time.perf_counter() - start < 2.0


if __name__ == "__main__":
    import tempfile

    count, seed = (int(a) for a in (sys.argv[1:] + [str(CASES), str(SEED)])[:2])
    with tempfile.TemporaryDirectory() as tmp:
        result = run(seed, count, write_store(Path(tmp) / "s.zarr"))
    for outcome, n in sorted(result.items()):
        print(f"{n:6d}  {outcome}")
