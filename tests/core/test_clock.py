from core.clock import SYSTEM_CLOCK, ManualClock, wall_ms


def test_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(wall=10.0, monotonic=5.0)
    assert (clock.wall(), clock.monotonic()) == (10.0, 5.0)
    clock.advance(1.5)
    assert (clock.wall(), clock.monotonic(), wall_ms(clock)) == (11.5, 6.5, 11_500)


def test_system_monotonic_never_goes_back() -> None:
    first = SYSTEM_CLOCK.monotonic()
    assert SYSTEM_CLOCK.monotonic() >= first
    assert wall_ms(SYSTEM_CLOCK) > 1_600_000_000_000
