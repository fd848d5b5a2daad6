"""A model judge's verdict overturned: the reverse rule, through the same preview and apply as `R`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.history.overturn import overturn
from core.history.rule_edit import apply, preview
from core.history.suggest import SuggestionRefused
from core.rules import PolicyStore


def rules(tmp_path: Path, permission: dict[str, object]) -> tuple[PolicyStore, Path]:
    agent = tmp_path / "agent"
    config = agent / "extensions" / "pi-permission-system" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"permission": {}}))
    file = tmp_path / "rules.json"
    file.write_text(json.dumps({"permission": permission}))
    return PolicyStore(agent, None, file, home="/home/me"), file


def test_a_judges_allow_becomes_a_deny_rule_for_exactly_that_value(tmp_path: Path) -> None:
    store, file = rules(tmp_path, {"bash": {"make *": "allow"}})
    offer = overturn(store, "allow", "bash", "make deploy", 1.0)
    assert offer.rule_json() == {"permission": {"bash": {"make deploy": "deny"}}}
    change = preview(offer, file, store)
    assert '+      "make deploy": "deny"' in change.diff
    apply(offer, file, confirmed=change, rules=store)
    assert json.loads(file.read_text())["permission"]["bash"] == {"make *": "allow", "make deploy": "deny"}


def test_an_exact_allow_already_there_is_turned_into_the_deny(tmp_path: Path) -> None:
    store, file = rules(tmp_path, {"bash": {"make deploy": "allow"}})
    offer = overturn(store, "allow", "bash", "make deploy", 1.0)
    apply(offer, file, confirmed=preview(offer, file, store), rules=store)
    assert json.loads(file.read_text())["permission"]["bash"] == {"make deploy": "deny"}
    with pytest.raises(SuggestionRefused, match="already sets"):
        preview(offer, file, store)  # already denied


def test_a_judges_deny_becomes_the_allow_r_would_offer_never_loosening_a_deny(tmp_path: Path) -> None:
    store, _ = rules(tmp_path, {"bash": {"rm *": "deny"}})
    allow = overturn(store, "deny", "bash", "ls -la", 1.0)
    assert allow.rule_json() == {"permission": {"bash": {"ls -la": "allow"}}}
    with pytest.raises(SuggestionRefused, match="loosen"):
        overturn(store, "deny", "bash", "rm -rf /tmp/x", 1.0)


@pytest.mark.parametrize(("verdict", "value", "why"), [
    ("allow", "ls *", "wildcard"), ("defer", "ls", "decided nothing"), ("allow", "", "no value")])
def test_what_cannot_be_overturned_says_why(tmp_path: Path, verdict: str, value: str, why: str) -> None:
    store, _ = rules(tmp_path, {})
    with pytest.raises(SuggestionRefused, match=why):
        overturn(store, verdict, "bash", value, 1.0)
