"""Adversarial matching: time to judge one value against a config, as the value grows.

Run with `uv run python -m bench.bench_matching` (add `--old` to also time the backtracking
regex translation that the matcher replaced, on the small sizes only: it takes minutes beyond).
For each adversarial case the time per value should grow linearly with its length: the last
column, nanoseconds per character, stays flat.
"""

from __future__ import annotations

import re
import sys
import time

from core.rules.evaluate import Candidates
from core.rules.model import Rule, make_rule

HOME = "/home/me"
SIZES = (1_000, 10_000, 100_000, 1_000_000)
OLD_SIZES = (100, 200, 400)
# (name, rules, repeated unit, suffix): the values, and values whose suffix fits the
# pattern's tail so that the middle segments are searched across the whole value.
CASES: tuple[tuple[str, dict[str, str], str, str], ...] = (
    ("*/secrets/*.pem vs /secrets/ * n", {"*": "allow", "*/secrets/*.pem": "deny"}, "/secrets/", ""),
    ("*/secrets/*.pem vs /secretX/ * n + .pem", {"*": "allow", "*/secrets/*.pem": "deny"},
     "/secretX/", ".pem"),
    ("*a*a*a*b vs a * n", {"*": "allow", "*a*a*a*b": "deny"}, "a", ""),
    ("*a*a*a*b vs c * n + b", {"*": "allow", "*a*a*a*b": "deny"}, "c", "b"),
    ("*a?a*a?b * vs aXa * n", {"*": "allow", "*a?a*a?b *": "deny"}, "aXa", ""),
    ("*a?a*a?b * vs aXc * n + aYb", {"*": "allow", "*a?a*a?b *": "deny"}, "aXc", "aYb"),
)


def _rules(patterns: dict[str, str]) -> list[Rule]:
    return [make_rule("read", p, a, origin="global", layer="config", home=HOME)  # type: ignore[arg-type]
            for p, a in patterns.items()]


def _old_regex(rules: list[Rule]) -> re.Pattern[str]:
    """The replaced translation: one DOTALL regex, alternatives from the last rule to the first."""
    def source(pattern: str) -> str:
        tail = pattern.endswith(" *")
        body = pattern[:-2] if tail else pattern
        text = re.sub(r"(\\\*)+", ".*", re.escape(body)).replace("\\?", ".")
        return text + ("(?: .*)?" if tail else "")
    return re.compile("|".join(f"({source(r.pattern)})" for r in reversed(rules)), re.DOTALL)


def _time(call: object, value: str) -> float:
    assert callable(call)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        call(value)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    old = "--old" in sys.argv
    print(f"{'case':46} {'length':>10} {'seconds':>12} {'ns/char':>9}")
    for name, patterns, unit, suffix in CASES:
        rules = _rules(patterns)
        candidates = Candidates(rules)
        for size in SIZES:
            value = unit * (size // len(unit)) + suffix
            seconds = _time(candidates.last_index, value)
            print(f"{name:46} {len(value):>10,} {seconds:>12.6f} {seconds / len(value) * 1e9:>9.1f}")
        if old:
            regex = _old_regex(rules)
            for size in OLD_SIZES:
                value = unit * (size // len(unit)) + suffix
                seconds = _time(regex.fullmatch, value)
                print(f"{'  old regex: ' + name:46} {len(value):>10,} {seconds:>12.6f} "
                      f"{seconds / len(value) * 1e9:>9.1f}")


if __name__ == "__main__":
    main()
