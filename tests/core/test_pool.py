"""``trysquare._pool.bounded_map``: pool.map's order, with a bounded number of calls in flight."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from trysquare._pool import bounded_map

pytestmark = pytest.mark.fast


def test_results_come_in_order_and_no_more_than_the_window_is_submitted() -> None:
    lock = threading.Lock()
    submitted = 0
    most_ahead = 0
    taken = 0

    def items():
        nonlocal submitted, most_ahead
        for number in range(50):
            with lock:
                submitted += 1
                most_ahead = max(most_ahead, submitted - taken)
            yield number

    with ThreadPoolExecutor(max_workers=3) as pool:
        found = []
        for value in bounded_map(pool, lambda n: n * n, items(), window=4):
            taken += 1
            found.append(value)
    assert found == [n * n for n in range(50)]
    assert most_ahead <= 4


def test_an_error_in_a_call_reaches_the_caller_at_its_place() -> None:
    def check(number: int) -> int:
        if number == 3:
            raise ValueError("three")
        return number

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = bounded_map(pool, check, range(6), window=2)
        assert [next(results) for _ in range(3)] == [0, 1, 2]
        with pytest.raises(ValueError, match="three"):
            next(results)
