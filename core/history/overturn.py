"""A model judge's verdict overturned after the fact: the rule that would have decided that ask the
other way, offered through the same confirm step as every rule (`core.history.rule_edit`: the JSON,
the file, the diff, its checks), never written silently.

A judge's allow becomes a deny rule for exactly the value it allowed; a judge's deny becomes the allow
rule `R` would offer for that ask (`suggest.suggestion_from_ask`: never one that loosens a deny)."""

from __future__ import annotations

from core.history.suggest import Suggestion, SuggestionRefused, suggestion_from_ask
from core.rules.config import PolicyStore


def overturn(rules: PolicyStore, verdict: str, surface: str, value: str | None, at: float) -> Suggestion:
    """The rule that reverses the judge's `verdict` on `surface` `value`; `SuggestionRefused` says why
    none can be written (no value, a value that is itself a wildcard, a verdict that decided nothing)."""
    if not surface or not value:
        raise SuggestionRefused("the judge's record holds no value for this ask: no exact rule fits")
    if verdict == "deny":
        return suggestion_from_ask(rules, surface, (value,), (), "", at)
    if verdict != "allow":
        raise SuggestionRefused("the judge decided nothing on this ask: there is no verdict to overturn")
    if set(value) & {"*", "?"}:
        raise SuggestionRefused("the value holds wildcard characters: an exact deny rule cannot be written")
    return Suggestion(surface, value, 0, ("",), (value,), at, state="deny")
