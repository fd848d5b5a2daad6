"""The tolerant reader of request files (`docs/design/contract.md` § Reading requests), as the reference
reads them.

Five required fields decide whether a request is usable, a malformed optional field is dropped on
its own (with its reason kept), and `accessIntent`, `payload` and `sessionApproval` are
all-or-nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field, ValidationError

from core.wire.base import StrTuple, WireModel, strict_json_loads
from core.wire.fast_reader import decode_usual, plain_reader, read_usual
from core.wire.limits import MAX_REQUEST_BYTES
from core.wire.request import (
    MAX_HOPS,
    CarriedHop,
    ForwardedAccessIntent,
    ForwardedRequest,
    ParsedRequest,
    PromptPayload,
    SessionGrant,
    SuggestedGrants,
)


class _LegacySessionApproval(WireModel):
    surface: Annotated[str, Field(min_length=1)]
    patterns: StrTuple


class _GrantsSessionApproval(WireModel):
    grants: Annotated[tuple[SessionGrant, ...], Field(min_length=1, strict=False)]


class _Hops(WireModel):
    hops: Annotated[tuple[CarriedHop, ...], Field(min_length=1, max_length=MAX_HOPS, strict=False)]


def _read_hops(value: object) -> tuple[CarriedHop, ...]:
    return _Hops.model_validate({"hops": value}).hops


class RequestRejected(ValueError):
    """The file is not a usable request; `reason` says why in words a person can act on."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_REQUIRED_STRINGS = ("id", "requesterSessionId", "targetSessionId", "requesterAgentName")
_OPTIONAL_STRINGS = ("message", "surface", "value")
_SOURCES: frozenset[str] = frozenset({"tool_call", "skill_input", "skill_read"})


def _decode_json_object(data: bytes) -> dict[str, Any]:
    if len(data) > MAX_REQUEST_BYTES:
        raise RequestRejected(f"file is {len(data)} bytes, over the {MAX_REQUEST_BYTES}-byte limit")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestRejected(f"not valid UTF-8 (byte {exc.start})") from exc
    try:
        value = strict_json_loads(text)
    except (json.JSONDecodeError, ValueError, RecursionError) as exc:
        raise RequestRejected(f"not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise RequestRejected(f"JSON is not an object (got {type(value).__name__})")
    return value


def _finite_time(value: object) -> float:
    """`createdAt` as a float; a bool, a non-number or one beyond a float's range is refused."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RequestRejected("required field 'createdAt' must be a finite number")
    try:
        as_float = float(value)
    except OverflowError:
        as_float = math.inf
    if not math.isfinite(as_float):
        raise RequestRejected("required field 'createdAt' must be a finite number")
    return as_float


def _short_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "value"
    return f"{where}: {first['msg']}"


def _read_session_approval(value: object) -> SuggestedGrants:
    if isinstance(value, dict) and "grants" in value:
        newest = _GrantsSessionApproval.model_validate(value)
        return SuggestedGrants(shape="grants", grants=newest.grants)
    legacy = _LegacySessionApproval.model_validate(value)
    grants = tuple(SessionGrant(surface=legacy.surface, pattern=p) for p in legacy.patterns)
    return SuggestedGrants(shape="legacy", grants=grants)


_ALL_OR_NOTHING: tuple[tuple[str, Callable[[object], object]], ...] = (
    ("sessionApproval", _read_session_approval),
    ("payload", PromptPayload.model_validate),
    ("accessIntent", ForwardedAccessIntent.model_validate),
    ("hops", _read_hops),
)


#: The fast path's readers of the two fields whose wire shape is not the model's.
PRE_READ: dict[str, Callable[[object], object]] = {
    "sessionApproval": _read_session_approval, "hops": _read_hops}
#: `core.wire.fast_reader.read_plain`: the plainest files, read from their bytes in one validation.
read_plain = plain_reader(PRE_READ)


def parse_request(data: bytes) -> ParsedRequest:
    """Read a request file's bytes; raise `RequestRejected` when the request is unusable.

    The usual shape is read by `core.wire.fast_reader`; anything else by the tolerant reader below,
    which gives the same value for the usual shape too (`read_tolerantly`)."""
    plain = read_plain(data)
    if plain is not None:
        return _new_tuple(ParsedRequest, (plain, data, {}))  # `ParsedRequest(plain, data, {})`, made in C
    return parse_unplain(data)


def parse_unplain(data: bytes) -> ParsedRequest:
    """`parse_request` of a file `read_plain` refused (None), without reading it that way again: a
    caller that tries `read_plain` itself (`core.serving.intake.read_guarded`, one call fewer per file)."""
    obj = decode_usual(data)
    if obj is None:
        obj = _decode_json_object(data)
    else:
        usual = read_usual(obj, PRE_READ)
        if usual is not None:
            return ParsedRequest(usual, data, {})
    return _read_object(obj, data)


def read_tolerantly(data: bytes) -> ParsedRequest:
    """`parse_request` without the fast path: what it must equal (tests, benchmarks)."""
    return _read_object(_decode_json_object(data), data)


def _read_object(obj: dict[str, Any], data: bytes) -> ParsedRequest:
    fields: dict[str, Any] = {}
    for key in _REQUIRED_STRINGS:
        if key not in obj:
            raise RequestRejected(f"required field {key!r} is missing")
        if not isinstance(obj[key], str):
            raise RequestRejected(f"required field {key!r} must be a string")
        fields[key] = obj[key]
    created = obj.get("createdAt")
    if "createdAt" not in obj:
        raise RequestRejected("required field 'createdAt' is missing")
    fields["createdAt"] = _finite_time(created)

    dropped: dict[str, str] = {}
    for key in _OPTIONAL_STRINGS:
        if key in obj and obj[key] is not None:
            if isinstance(obj[key], str):
                fields[key] = obj[key]
            else:
                dropped[key] = "not a string"
    if "source" in obj:
        if isinstance(obj["source"], str) and obj["source"] in _SOURCES:
            fields["source"] = obj["source"]
        else:
            dropped["source"] = "not one of tool_call, skill_input, skill_read"

    for key, reader in _ALL_OR_NOTHING:
        if key not in obj:
            continue
        try:
            fields[key] = reader(obj[key])
        except ValidationError as exc:
            dropped[key] = _short_error(exc)
    return ParsedRequest(request=ForwardedRequest.model_validate(fields), raw=data, dropped=dropped)


_new_tuple = tuple.__new__
