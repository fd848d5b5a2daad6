import threading

from core.clock import SYSTEM_CLOCK, wall_ms
from core.testing import ManualClock
from tests.helpers import poll_until


def test_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(wall=10.0, monotonic=5.0)
    assert (clock.wall(), clock.monotonic()) == (10.0, 5.0)
    clock.advance(1.5)
    assert (clock.wall(), clock.monotonic(), wall_ms(clock)) == (11.5, 6.5, 11_500)


def test_system_monotonic_never_goes_back() -> None:
    first = SYSTEM_CLOCK.monotonic()
    assert SYSTEM_CLOCK.monotonic() >= first
    assert wall_ms(SYSTEM_CLOCK) > 1_600_000_000_000


def test_a_manual_sleep_blocks_its_thread_until_the_clock_passes_it() -> None:
    clock = ManualClock()
    clock.sleep(0.0)  # nothing to wait for
    sleeper = threading.Thread(target=clock.sleep, args=(30.0,))
    sleeper.start()
    poll_until(lambda: clock.waiting == 1, what="the thread sleeping")
    clock.advance(29.0)
    assert clock.waiting == 1 and sleeper.is_alive()
    clock.advance(1.0)
    sleeper.join(30)  # a hang guard
    assert not sleeper.is_alive() and clock.waiting == 0
