"""KeySafety with a fake clock: every key in every state, then random event sequences (hypothesis)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.clock import SYSTEM_CLOCK
from tui.actions import DOUBLE_PRESS
from tui.keysafety import KeyRules, KeySafety

ACTIONS = ("approve", "approve_session", "approve_session_both", "deny", "approve_serving", "deny_reason")
STEP_ACTIONS = ("approve_serving", "deny_reason")


@dataclass
class Clock:
    t: float = 100.0

    def __call__(self) -> float:
        return self.t


def make(grace: float = 0.5, double: bool = True, expiry: float | None = 5.0) -> tuple[KeySafety, Clock]:
    clock = Clock()
    return KeySafety(clock, KeyRules(grace_s=grace, double_press=double, arm_expiry_s=expiry)), clock


@pytest.mark.parametrize("action", ACTIONS)
def test_nothing_selected_ignores_every_key(action: str) -> None:
    safety, clock = make()
    assert safety.press(action, clock.t).reason == "no-ask"
    safety.show(None)
    assert safety.press(action, clock.t + 100).reason == "no-ask"


@pytest.mark.parametrize("action", ACTIONS)
def test_shown_but_not_painted_ignores_every_key_however_late(action: str) -> None:
    safety, clock = make()
    safety.show("a")
    verdict = safety.press(action, clock.t + 3600)
    assert (verdict.outcome, verdict.reason) == ("ignore", "not-painted")
    assert safety.ready_at() is None and not safety.accepting(clock.t + 3600)


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("double", [True, False])
def test_grace_counts_from_the_paint_and_a_key_read_before_the_paint_never_counts(
    action: str, double: bool
) -> None:
    safety, clock = make(grace=0.5, double=double)
    safety.show("a")
    clock.t = 110.0  # painted ten seconds after the selection changed (a loaded machine)
    safety.painted("a")
    assert safety.press(action, 109.9).reason == "not-painted"  # read before the paint, handled after
    assert safety.press(action, 110.0).reason == "in-grace"
    assert safety.press(action, 110.499).reason == "in-grace"
    assert safety.armed is None
    verdict = safety.press(action, 110.5)
    if action in STEP_ACTIONS or not double:
        assert verdict.outcome == "commit"
    else:
        assert (verdict.outcome, verdict.reason) == ("arm", "first-press")
        assert safety.press(action, 110.6).reason == "second-press"


def test_only_the_first_paint_starts_the_grace() -> None:
    safety, _ = make()
    safety.show("a")
    safety.painted("a", 100.0)
    safety.painted("a", 105.0)  # a later repaint (the age ticks) does not restart it
    assert safety.ready_at() == 100.5
    safety.painted("b", 99.0)  # a stale token changes nothing
    assert safety.ready_at() == 100.5


@pytest.mark.parametrize("action", sorted(DOUBLE_PRESS))
def test_double_press_arms_then_commits_and_resets(action: str) -> None:
    safety, _ = make(grace=0.0)
    safety.show("a")
    safety.painted("a", 100.0)
    assert safety.press(action, 100.0).outcome == "arm"
    assert safety.armed is not None and safety.armed.action == action
    assert safety.press(action, 100.1).outcome == "commit"
    assert safety.armed is None
    assert safety.press(action, 100.2).outcome == "arm"  # a third press starts over


def test_another_decision_key_rearms_instead_of_committing() -> None:
    safety, _ = make(grace=0.0)
    safety.show("a")
    safety.painted("a", 100.0)
    assert safety.press("approve", 100.0).outcome == "arm"
    assert safety.press("deny", 100.1).outcome == "arm"
    assert safety.press("approve", 100.2).outcome == "arm"
    assert safety.press("approve", 100.3).outcome == "commit"


@pytest.mark.parametrize("action", sorted(DOUBLE_PRESS))
def test_hidden_characters_force_a_second_press_when_double_press_is_off(action: str) -> None:
    safety, _ = make(grace=0.0, double=False)
    safety.show("plain")
    safety.painted("plain", 100.0)
    assert safety.press(action, 100.0).reason == "single-press"
    safety.show("tricky", hidden=True)
    safety.painted("tricky", 100.0)
    first = safety.press(action, 100.0)
    assert (first.outcome, first.hidden) == ("arm", True)
    assert safety.press(action, 100.1).outcome == "commit"


def test_armed_press_expires_after_the_limit() -> None:
    safety, _ = make(grace=0.0, expiry=5.0)
    safety.show("a")
    safety.painted("a", 100.0)
    safety.press("approve", 100.0)
    assert not safety.expire(105.0) and safety.armed is not None
    verdict = safety.press("approve", 105.01)
    assert (verdict.outcome, verdict.reason) == ("arm", "expired")
    assert safety.press("approve", 105.02).outcome == "commit"
    safety.press("deny", 200.0)
    assert safety.expire(205.5) and safety.armed is None
    assert not safety.expire(300.0)


def test_armed_press_never_expires_when_configured_like_pi() -> None:
    safety, _ = make(grace=0.0, expiry=None)
    safety.show("a")
    safety.painted("a", 100.0)
    safety.press("approve", 100.0)
    assert not safety.expire(10_000.0)
    assert safety.press("approve", 10_000.0).outcome == "commit"


@pytest.mark.parametrize("reset", ["show-other", "show-same", "modal", "disarm"])
def test_moving_opening_a_step_or_escape_clears_the_armed_press(reset: str) -> None:
    safety, _ = make(grace=0.0)
    safety.show("a")
    safety.painted("a", 100.0)
    safety.press("approve", 100.0)
    if reset == "show-other":
        safety.show("b")
        safety.show("a")
    elif reset == "show-same":
        safety.show("a")
    elif reset == "modal":
        safety.open_modal("m")
        safety.show("a")
    else:
        assert safety.disarm()
        assert not safety.disarm()
    safety.painted("a", 101.0)
    assert safety.press("approve", 101.0).outcome == "arm"


@pytest.mark.parametrize("action", ACTIONS)
def test_every_ask_key_is_inert_while_a_modal_is_open(action: str) -> None:
    safety, _ = make(grace=0.0)
    safety.show("a")
    safety.painted("a", 100.0)
    safety.open_modal("m")
    assert safety.modal_open
    assert safety.press(action, 100.0).reason == "modal-open"
    safety.painted("m", 100.0)
    assert safety.press(action, 1000.0).reason == "modal-open"


def test_modal_confirm_waits_for_its_own_paint_and_grace() -> None:
    safety, _ = make(grace=0.5)
    safety.show("a")
    safety.painted("a", 100.0)
    safety.open_modal("m")
    assert safety.confirm("m", 200.0).reason == "not-painted"
    safety.painted("m", 201.0)
    assert safety.ready_at() == 201.5
    assert safety.confirm("m", 200.9).reason == "not-painted"  # read before the modal was on screen
    assert safety.confirm("m", 201.4).reason == "in-grace"
    assert safety.confirm("other", 300.0).outcome == "ignore"
    assert safety.confirm("m", 201.5).outcome == "commit"
    safety.show("a")  # closed: back to the ask, which must be painted again
    assert not safety.modal_open and safety.confirm("m", 300.0).outcome == "ignore"
    assert safety.press("approve", 300.0).reason == "not-painted"
    safety.painted("a", 300.0)
    # Its grace again, said as what it is: not a new ask (the ask has been on screen for minutes).
    verdict = safety.press("approve", 300.1)
    assert verdict.reason == "back-in-grace" and "after a dialog closes" in verdict.why
    safety.show("b")
    safety.painted("b", 301.0)
    assert safety.press("approve", 301.1).reason == "in-grace"  # another ask: a new one


def test_system_clock_uses_the_toolkit_stamp() -> None:
    assert SYSTEM_CLOCK.key_time(3.0) == 3.0


def test_verdicts_explain_themselves() -> None:
    safety, _ = make()
    safety.show("a")
    assert safety.press("approve", 0).why == "Ignored: that key came before the ask was on screen."
    safety.painted("a", 0.0)
    assert "keys wait a moment" in safety.press("approve", 0.1).why


# -- sequences -------------------------------------------------------------------------------------

TARGETS = ("a", "b")
event = st.one_of(
    st.tuples(st.just("advance"), st.floats(0, 7, allow_nan=False)),
    st.tuples(st.just("show"), st.sampled_from((*TARGETS, None)), st.booleans()),
    st.tuples(st.just("painted"), st.sampled_from((*TARGETS, "m"))),
    st.tuples(st.just("modal"), st.just("m")),
    st.tuples(st.just("press"), st.sampled_from(ACTIONS), st.floats(-1, 0, allow_nan=False)),
    st.tuples(st.just("confirm"), st.just("m"), st.floats(-1, 0, allow_nan=False)),
    st.tuples(st.just("disarm")),
    st.tuples(st.just("expire")),
)


@settings(max_examples=400, deadline=None)
@given(
    events=st.lists(event, max_size=40),
    grace=st.sampled_from((0.0, 0.3, 0.5)),
    double=st.booleans(),
    expiry=st.sampled_from((None, 5.0)),
)
def test_no_sequence_commits_what_was_not_seen(
    events: list[tuple[object, ...]], grace: float, double: bool, expiry: float | None
) -> None:
    """A model of what the person has seen, checked against every verdict."""
    safety, clock = make(grace, double, expiry)
    shown: str | None = None
    hidden = False
    painted: dict[str, float] = {}
    modal: str | None = None
    arms: list[tuple[str, str, float]] = []  # presses since the last reset, on the shown ask
    for item in events:
        kind = item[0]
        if kind == "advance":
            clock.t += float(item[1])  # type: ignore[arg-type]
        elif kind == "show":
            shown, hidden = item[1], bool(item[2])  # type: ignore[assignment]
            painted.clear()
            modal = None
            arms.clear()
            safety.show(shown, hidden=hidden)
        elif kind == "painted":
            token = str(item[1])
            if token in (modal, shown) and token not in painted:
                painted[token] = clock.t
            safety.painted(token)
        elif kind == "modal":
            modal = "m"
            painted.pop("m", None)
            arms.clear()
            safety.open_modal("m")
        elif kind == "disarm":
            arms.clear()
            safety.disarm()
        elif kind == "expire":
            if safety.expire():
                arms.clear()
        elif kind == "press":
            action, at = str(item[1]), clock.t + float(item[2])  # type: ignore[arg-type]
            verdict = safety.press(action, at)
            if verdict.outcome != "ignore":
                assert shown is not None and modal is None
                assert shown in painted and at >= painted[shown] + grace
            if verdict.outcome == "commit" and action in DOUBLE_PRESS and (double or hidden):
                assert arms and arms[-1][0] == action and arms[-1][1] == shown
                assert expiry is None or at - arms[-1][2] <= expiry
            if verdict.outcome == "arm":
                arms.append((action, str(shown), at))
            elif verdict.outcome == "commit":
                arms.clear()
            if verdict.outcome != "ignore" and action in STEP_ACTIONS:
                assert verdict.outcome == "commit"
        elif kind == "confirm":
            at = clock.t + float(item[2])  # type: ignore[arg-type]
            verdict = safety.confirm("m", at)
            if verdict.outcome == "commit":
                assert modal == "m" and "m" in painted and at >= painted["m"] + grace
