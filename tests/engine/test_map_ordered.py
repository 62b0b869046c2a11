"""``map_ordered``: results in item order, at most ``workers + 1`` items in flight, errors raised
in order with no call left running."""

from __future__ import annotations

import threading
import time

import pytest

from zarr_vectors.errors import InputError
from zarr_vectors.storage.threads import map_ordered


def test_results_come_in_item_order_from_the_pool() -> None:
    names: set[str] = set()

    def slow_first(i: int) -> int:
        names.add(threading.current_thread().name)
        time.sleep(0.02 if i % 3 == 0 else 0)
        return i * i

    assert list(map_ordered(slow_first, range(12), 2)) == [i * i for i in range(12)]
    assert names and all(n.startswith("zv-cells") for n in names)
    names.clear()
    assert list(map_ordered(slow_first, range(5), 1)) == [0, 1, 4, 9, 16]
    assert names == {threading.current_thread().name}


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_at_most_workers_plus_one_items_are_taken_ahead_of_the_consumer(workers: int) -> None:
    taken = 0
    ahead: list[int] = []

    def items():  # type: ignore[no-untyped-def]
        nonlocal taken
        for i in range(20):
            taken += 1
            yield i

    for consumed, _ in enumerate(map_ordered(lambda i: i, items(), workers)):
        ahead.append(taken - consumed)
    assert max(ahead) <= workers + 1
    assert max(ahead) == (workers + 1 if workers > 1 else 1)


def test_the_first_error_is_raised_once_no_call_runs() -> None:
    running = 0
    lock = threading.Lock()
    started: list[int] = []

    def work(i: int) -> int:
        nonlocal running
        with lock:
            running += 1
            started.append(i)
        try:
            time.sleep(0.01)
            if i == 3:
                raise InputError("item 3 is bad")
            return i
        finally:
            with lock:
                running -= 1

    got = []
    with pytest.raises(InputError, match="item 3 is bad"):
        for r in map_ordered(work, range(50), 2):
            got.append(r)
    assert got == [0, 1, 2]
    assert running == 0
    assert max(started) <= 3 + 2  # nothing far beyond the failing item was started


def test_closing_early_cancels_the_rest() -> None:
    started: list[int] = []
    gen = map_ordered(lambda i: started.append(i) or i, range(100), 2)
    assert next(gen) == 0
    gen.close()
    assert len(started) <= 3
