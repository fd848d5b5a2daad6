"""The usual request, read in one validation: the reader's fast path (issue 37).

Nearly every file a child writes has the usual shape: only the fields this node reads, no null but
a display string's, every one well formed. For such an object the tolerant reader's work (each
field checked alone, then the whole validated again) gives what one `ForwardedRequest.model_validate`
of the object itself gives, in pydantic's compiled code. This module checks the few ways the two
could differ (a name the reader does not read, a null it reads as absent, left out here too, or
drops, a time beyond a finite float, the two fields whose wire shape is not the model's) and returns
None for any object not of the usual shape or not valid: the tolerant reader (`core.wire.reader`)
then reads it, so every rejection and every dropped field's reason stays the reader's.

The object is decoded by pydantic's own JSON parser (`pydantic_core.from_json`, about half the
standard decoder's cost), which refuses everything the reader's strict decoder refuses that a child
can write (`NaN` and `Infinity`, raw control characters in strings, a lone surrogate escape, a byte
order mark, bytes that are not UTF-8, trailing data, integers of thousands of digits) and reads the
rest to the same values (a key written twice: the last one; `1e400`: infinite; `-0`: the integer 0).
Whatever it refuses, the reader decodes again and says why.
`tests/wire/test_fast_reader.py` proves the two give the same value on generated requests.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError
from pydantic_core import from_json

from core.wire.base import MAX_WIRE_NESTING
from core.wire.limits import MAX_REQUEST_BYTES
from core.wire.request import ForwardedRequest

#: The wire names the reader reads: any other key (a snake_case name the model would also take,
#: or one unknown) sends the object to the tolerant reader.
_USUAL_KEYS = frozenset({
    "id", "createdAt", "requesterSessionId", "targetSessionId", "requesterAgentName", "message",
    "source", "surface", "value", "sessionApproval", "payload", "accessIntent", "hops",
})
#: The display strings the reader reads as absent when null (a null elsewhere it refuses or drops).
_NULL_AS_ABSENT = frozenset({"message", "surface", "value"})
#: The fields whose wire shape is not the model's: read first, as the reader reads them.
_PRE_READ = ("sessionApproval", "hops")


def decode_usual(data: bytes) -> dict[str, Any] | None:
    """The JSON object `data` holds, decoded to what the reader's strict decoder gives; None for
    anything else, and for any file that might nest deeper than the limit (the reader then decodes
    it and says why)."""
    if len(data) > MAX_REQUEST_BYTES or data.count(b"[") + data.count(b"{") > MAX_WIRE_NESTING:
        return None  # (an ASCII bracket's byte is never part of another character's UTF-8)
    try:
        value = from_json(data, allow_inf_nan=False)
    except ValueError:
        return None
    return value if type(value) is dict else None


Reader = Callable[[object], object]
#: `ForwardedRequest.model_validate` without its Python wrapper (which only passes its defaults on).
_validate = ForwardedRequest.__pydantic_validator__.validate_python


def read_usual(obj: dict[str, Any], pre_read: Mapping[str, Reader]) -> ForwardedRequest | None:
    """The request `obj` holds when it has the usual shape and is valid, else None.

    `pre_read` holds the reader's own readers of `sessionApproval` and `hops`."""
    if not obj.keys() <= _USUAL_KEYS:
        return None
    if None in obj.values():  # 20.7.3 writes a null `surface`/`value` when its prompt has none
        if not {key for key, value in obj.items() if value is None} <= _NULL_AS_ABSENT:
            return None
        obj = {key: value for key, value in obj.items() if value is not None}
    try:
        if "sessionApproval" in obj or "hops" in obj:
            obj = dict(obj)
            for key in _PRE_READ:
                if key in obj:
                    obj[key] = pre_read[key](obj[key])
        request: ForwardedRequest = _validate(obj)
    except ValidationError:
        return None
    return request if math.isfinite(request.created_at) else None
