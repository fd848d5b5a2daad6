"""Plain-text lines for an explanation trail; the TUI shows them literally (no markup)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def render_trail(trail: Sequence[Mapping[str, Any]]) -> list[str]:
    """One or more lines per trail step, in order."""
    lines: list[str] = []
    for step in trail:
        lines.extend(_RENDERERS.get(str(step.get("step")), _generic)(step))
    return lines


def _rule(rule: Mapping[str, Any]) -> str:
    text = f"{rule['surface']} {rule['pattern']!r} -> {rule['action']} [{rule['origin']}]"
    if rule.get("rewrittenFrom"):
        text += f" (was {rule['rewrittenFrom']})"
    if rule.get("source"):
        text += f" from {rule['source']}"
    return text


def _policy(step: Mapping[str, Any]) -> list[str]:
    lines = [f"policy for agent {step['agent']!r}"]
    if step.get("suspiciousAgent"):
        lines.append(f"  suspicious agent name: {step['suspiciousAgent']}; no agent file loaded")
    if step.get("failClosedScopes"):
        scopes = ", ".join(step["failClosedScopes"])
        lines.append(f"  fail-closed: invalid {scopes} config, every allow is floored to ask")
    if step.get("yolo"):
        lines.append("  yolo mode: ask rules count as allow")
    if step.get("configErrors"):
        lines.append(f"  {step['configErrors']} config error(s)")
    return lines


#: How each evaluator picks the deciding rule, in plain words (the rule written last wins in both).
_HOW = {
    "first-candidate": "the first value one of the rules matches decides; of the rules that match it, "
                       "the one written last wins",
    "any-value": "of the rules that match any of its values, the one written last wins",
}


def _evaluate(step: Mapping[str, Any]) -> list[str]:
    unit = f" (unit {step['unit']!r})" if step.get("unit") else ""
    lines = [f"evaluate {step['surface']}{unit}: {_HOW.get(step['evaluator'], step['evaluator'])}"]
    for entry in step["consulted"]:
        matched_as = f" (matched as {entry['matchedAs']!r})" if "matchedAs" in entry else ""
        lines.append(f"  value {entry['value']!r}{matched_as}:")
        for rule in entry["rules"]:
            mark = "match" if rule["matched"] else "-    "
            lines.append(f"    [{mark}] #{rule['position']} {_rule(rule)}")
    lines.append(f"  winner: {_rule(step['winner'])} on {step['winner']['value']!r}")
    return lines


def _fold(step: Mapping[str, Any]) -> list[str]:
    pairs = ", ".join(f"{m}={v}" for m, v in zip(step["members"], step["verdicts"], strict=True))
    return [f"family fold of {step['surface']}: {pairs}; most restrictive: {step['verdict']}"]


def _floor(step: Mapping[str, Any]) -> list[str]:
    if not step["applied"]:
        return [f"child floor {step['floor']}: not applied ({step['before']} stands)"]
    return [f"child floor {step['floor']}: {step['before']} -> {step['after']}"
            + (" (yolo keeps allow)" if step.get("yolo") else "")]


def _units(step: Mapping[str, Any]) -> list[str]:
    pairs = ", ".join(f"{u!r}={v}" for u, v in zip(step["units"], step["verdicts"], strict=True))
    return [f"asking units: {pairs}; most restrictive: {step['verdict']} ({step['chosen']!r})"]


def _verdict(step: Mapping[str, Any]) -> list[str]:
    decided = step.get("decidedBy")
    return [f"verdict: {step['verdict']}" + (f", decided by {describe_source(decided)}" if decided else "")]


def describe_source(source: Mapping[str, Any]) -> str:
    """A `decidedBy` object in words: `rule bash 'git *' [global]`, else its fields as `key=value`."""
    if source.get("kind") == "rule":
        text = f"rule {source.get('surface')} {source.get('pattern')!r} [{source.get('origin') or '?'}]"
        return text + (f" from {source['source']}" if source.get("source") else "")
    return _fields(source)


def _fields(mapping: Mapping[str, Any]) -> str:
    return ", ".join(
        f"{key}={value!r}" if isinstance(value, str) else f"{key}={value}" for key, value in mapping.items()
    )


def _grant_overridden(step: Mapping[str, Any]) -> list[str]:
    return [f"session grant {step['grant']!r} on {step['surface']} matched {step['value']!r}, but "
            f"this node's config denies it ({_rule(step['deny'])}): a grant never overrides a deny"]


def _authorizer_overridden(step: Mapping[str, Any]) -> list[str]:
    return [f"pi-authorizer's own rule {step['allow']!r} on {step['surface']} allowed {step['value']!r}, "
            f"but another layer denies it ({_rule(step['deny'])}): an allow of the --rules file never "
            "overrides a deny of another layer"]


def _no_facts(step: Mapping[str, Any]) -> list[str]:
    return [f"no facts: {step['reason']}"]


def _generic(step: Mapping[str, Any]) -> list[str]:
    return [f"{step.get('step', 'step')}: {_fields({k: v for k, v in step.items() if k != 'step'})}"]


def _pi_reading(step: Mapping[str, Any]) -> list[str]:
    def side(name: str) -> str:
        decided = step[name]["decidedBy"] or {}
        rule = f" by {decided.get('pattern')!r} ({decided.get('origin') or decided.get('kind')})" \
            if decided else ""
        return f"{step[name]['verdict']}{rule}"
    return [f"pi 20.7.3 reads these files or facts differently (docs/design/fidelity.md): "
            f"ours {side('ours')}, pi {side('pi')}; kept {step['kept']} (the more restrictive, "
            f"pi's on a tie)"]


_RENDERERS = {
    "pi-reading": _pi_reading,
    "policy": _policy,
    "evaluate": _evaluate,
    "family-fold": _fold,
    "child-floor": _floor,
    "asking-units": _units,
    "verdict": _verdict,
    "no-facts": _no_facts,
    "grant-overridden": _grant_overridden,
    "authorizer-allow-overridden": _authorizer_overridden,
}
