"""What every wire model and writer shares: strict immutable camelCase models, compact JSON.

The rest of `core.wire` (one room each): `request` (what a child sends), `reader` (the tolerant
reader of request files), `limits` (what one ask may ask), `decisions` (`decidedBy`), `response`
(the strict writer, and a child's reader to verify what is on disk).
"""

from __future__ import annotations

import json
import re
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


MAX_WIRE_NESTING = 128
"""The deepest nesting of arrays and objects read from a file or message another process can write
(a request, a response, a heartbeat, a parcel). The decoder recurses once per level on the
interpreter's stack; near its limit any Python the garbage collector runs meanwhile (a finalizer, a
weakref or gc callback) overflows it and aborts the process — seen in CI with a hostile request
nested 10,000 deep — so such a file is refused before it is decoded. None of them nests past ten."""


class NestedTooDeeply(ValueError):
    """The document nests objects and arrays deeper than the limit it is read with."""


_ESCAPED_BACKSLASH, _ESCAPED_QUOTE = "\\\\", '\\"'
#: Every byte but the four brackets (UTF-8 of any other character is deleted byte by byte); braces
#: read as brackets (a mismatched pair is the decoder's error, reached at no greater depth).
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_AS_BRACKETS = bytes.maketrans(b"{}", b"[]")
_RUN = re.compile(rb"\[+|\]+")
#: Passes that each remove the innermost pairs before the brackets left are counted run by run.
_PAIR_PASSES = 8


def check_nesting(text: str, limit: int) -> None:
    """Raise `NestedTooDeeply` when `[`/`{` outside strings nest deeper than `limit`.

    Every pass over the text runs in C, at about the decoder's own cost (issue 34 finding 5: a
    1 MiB request with brackets inside its strings cost 150 decodes while strings were skipped in
    Python). A text with no more openers than `limit` cannot (counted). Else: escaped backslashes
    and quotes removed, every other quote is a string's edge, so the even pieces of a split at `"`
    are the text outside strings; its brackets kept (`bytes.translate`); the innermost pairs
    removed a few passes over (`bytes.replace`), each pass one level; what is left counted run by
    run. For a text the decoder reads this is its exact depth; on any other text it never counts
    less than the decoder reaches before its error (a backslash outside a string stops the decoder
    there, so what follows it does not count; `tests/core/test_nesting.py`)."""
    if text.count("[") + text.count("{") <= limit:
        return
    bare = text.replace(_ESCAPED_BACKSLASH, "").replace(_ESCAPED_QUOTE, "") if "\\" in text else text
    outside = "".join(bare.split('"')[::2])
    brackets = outside.encode("utf-8", "surrogatepass").translate(_AS_BRACKETS, _NOT_BRACKETS)
    if brackets.count(b"[") <= limit:
        return
    depth = 0
    for _ in range(_PAIR_PASSES):
        fewer = brackets.replace(b"[]", b"")
        if len(fewer) == len(brackets):
            break
        brackets, depth = fewer, depth + 1
    if depth > limit:
        raise NestedTooDeeply(f"nested deeper than {limit} levels")
    for run in _RUN.finditer(brackets):
        size = run.end() - run.start()
        depth += size if brackets[run.start()] == ord("[") else -size
        if depth > limit:
            raise NestedTooDeeply(f"nested deeper than {limit} levels")


def string_end(text: str, start: int) -> int:
    """Where the JSON string opening at `start` ends (its escapes skipped), or the end of `text`."""
    index = start + 1
    while index < len(text):
        if text[index] == "\\":
            index += 2
        elif text[index] == '"':
            return index + 1
        else:
            index += 1
    return len(text)


def strict_json_loads(text: str | bytes) -> object:
    """`json.loads(text)` refusing `NaN`, `Infinity` and `-Infinity`, as JSON.parse does, and any
    nesting deeper than `MAX_WIRE_NESTING` (both `ValueError`); bytes are read as UTF-8."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    check_nesting(text, MAX_WIRE_NESTING)
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
