"""What one request may be and ask (issue 9 §2): the file's size, and the facts' counts and sizes."""

from __future__ import annotations

from core.wire.request import ForwardedAccessIntent

MAX_REQUEST_BYTES = 1024 * 1024

# What one request may ask this node to judge (issue 9 §2). Beyond any of these the ask is denied
# at once with the limit in its reason, before any rule sees it: work and memory per ask stay bounded
# however many values a child sends. Generous for real children: a bash chain splits into a few
# dozen units, a path ask carries a handful of aliases, a heredoc command a few KiB.
MAX_MATCH_VALUES = 256
MAX_ASKING_UNITS = 256
MAX_VALUE_CHARS = 64 * 1024
MAX_FACTS_CHARS = 256 * 1024


def over_limit(intent: ForwardedAccessIntent | None) -> str | None:
    """Why this ask exceeds what one request may ask (`MAX_*` above), or None when it is within.

    Counts are checked before sizes so a flood of values is refused without measuring each one.
    """
    if intent is None:
        return None
    values, units = intent.match_values, intent.asking_units or ()
    if len(values) > MAX_MATCH_VALUES:
        return f"accessIntent.matchValues has {len(values)} entries, over the limit of {MAX_MATCH_VALUES}"
    if len(units) > MAX_ASKING_UNITS:
        return f"accessIntent.askingUnits has {len(units)} entries, over the limit of {MAX_ASKING_UNITS}"
    boundary = intent.boundary_value
    total = sum(map(len, values))  # in C: every ask with facts is measured
    if units:
        total += sum([len(unit.command) for unit in units])
    if boundary is not None:
        total += len(boundary)
    if total <= MAX_VALUE_CHARS and total <= MAX_FACTS_CHARS:
        return None  # the usual ask: no value is longer than all of them together
    lengths = [*map(len, values), *[len(unit.command) for unit in units]]
    if boundary is not None:
        lengths.append(len(boundary))
    longest = max(lengths)
    if longest > MAX_VALUE_CHARS:
        return f"a value of accessIntent is {longest} characters long, over the limit of {MAX_VALUE_CHARS}"
    if total > MAX_FACTS_CHARS:
        return f"the values of accessIntent total {total} characters, over the limit of {MAX_FACTS_CHARS}"
    return None
