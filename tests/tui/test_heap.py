"""When the app freezes what survives a burst of arrivals, and when it gives it back (issue 37)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from tui.heap import FREEZE_STEP, Heap


@pytest.fixture
def heap() -> Iterator[Heap]:
    made = Heap()
    yield made
    made.settle()
    gc.unfreeze()


def test_a_burst_is_frozen_and_given_back_when_the_queue_halves(heap: Heap) -> None:
    heap.pending(10)
    assert gc.get_freeze_count() == 0
    heap.pending(10 + FREEZE_STEP)
    frozen = gc.get_freeze_count()
    assert frozen > 0  # what survived the burst is out of the collector's full passes
    heap.pending(FREEZE_STEP)
    # Decided a few: still frozen, and nothing frozen again (a frozen object another thread of this
    # process freed meanwhile lowers the count: it is not compared exactly).
    assert 0 < gc.get_freeze_count() <= frozen
    heap.pending((10 + FREEZE_STEP) // 2)
    assert gc.get_freeze_count() == 0  # halved: given back, its cycles collectable again
    heap.pending((10 + FREEZE_STEP) // 2 + FREEZE_STEP)
    assert gc.get_freeze_count() > 0
    heap.settle()
    assert gc.get_freeze_count() == 0


def test_asks_coming_and_going_one_by_one_never_freeze(heap: Heap) -> None:
    for n in range(3 * FREEZE_STEP):
        heap.pending(n % 7)
    assert gc.get_freeze_count() == 0


def test_the_end_of_a_burst_freezes_what_its_last_asks_left(heap: Heap) -> None:
    heap.burst_over(10)
    assert gc.get_freeze_count() == 0  # no burst: nothing frozen
    heap.pending(FREEZE_STEP + 10)
    gc.unfreeze()  # only to see the next freeze
    heap.burst_over(FREEZE_STEP + 500)
    assert gc.get_freeze_count() > 0
