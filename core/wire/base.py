"""What every wire model and writer shares: strict immutable camelCase models, compact JSON.

The rest of `core.wire` (one room each): `request` (what a child sends), `reader` (the tolerant
reader of request files), `limits` (what one ask may ask), `decisions` (`decidedBy`), `response`
(the strict writer, and a child's reader to verify what is on disk).
"""

from __future__ import annotations

import json
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictStr
from pydantic.alias_generators import to_camel


class WireModel(BaseModel):
    """Every wire model: strict (no coercion), immutable, camelCase on the wire, unknown fields ignored."""

    model_config = ConfigDict(
        strict=True,
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
    )


# JSON arrays arrive as lists; a strict model would refuse them for tuple fields. Only the container
# is lax: its items stay strict, so a number never becomes a string.
StrTuple = Annotated[tuple[StrictStr, ...], Field(strict=False)]


def reject_null(value: object) -> object:
    """For keys that may be absent but, when present, must not be null."""
    if value is None:
        raise ValueError("must be a string when present")
    return value


def reject_json_constant(name: str) -> float:
    raise ValueError(f"non-standard JSON number {name}")


# One decoder for every read: `json.loads(text, parse_constant=...)` builds a decoder and its scanner
# on each call, which cost more than the parse itself for a request file. `json.loads` shares its
# own default decoder across threads the same way.
_STRICT_DECODER = json.JSONDecoder(parse_constant=reject_json_constant)


def strict_json_loads(text: str) -> object:
    """`json.loads(text)` refusing `NaN`, `Infinity` and `-Infinity` (ValueError), as JSON.parse does."""
    return _STRICT_DECODER.decode(text)


# Built once: `json.dumps` with options builds an encoder on every call.
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_COMPACT_ASCII = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True)


def compact_json(value: object) -> bytes:
    """`JSON.stringify` bytes: compact, UTF-8, no trailing newline (lone surrogates escaped)."""
    try:
        return _COMPACT.encode(value).encode("utf-8")
    except UnicodeEncodeError:
        return _COMPACT_ASCII.encode(value).encode("ascii")
