"""The usual request, read in one validation: the reader's fast paths (issue 37).

Nearly every file a child writes has the usual shape: only the fields this node reads, no null but
a display string's or `boundaryValue`, every one well formed. Such a file is read from its bytes by
`read_plain` (`plain_reader`): one call of pydantic's compiled code into the model itself, the
model's own schema narrowed so that it refuses every file it would read otherwise than the tolerant
reader (`_plain_schema` says how), the fields whose wire shape is not the model's read by the
reader's own functions. Issue 37, sixth pass: 4.3 -> 2.9 µs per usual ask without facts, 7.1 -> 5.3
with (`docs/design/serving-speed.md`). A file it refuses is read as before: decoded (`decode_usual`),
then checked for the few ways the model and the tolerant reader could differ and validated in one
call (`read_usual`), else read by the tolerant reader (`core.wire.reader`), so every rejection and
every dropped field's reason stays the reader's.

The object is decoded by pydantic's own JSON parser (`pydantic_core.from_json`, about half the
standard decoder's cost), which refuses everything the reader's strict decoder refuses that a child
can write (`NaN` and `Infinity`, raw control characters in strings, a lone surrogate escape, a byte
order mark, bytes that are not UTF-8, trailing data, integers of thousands of digits) and reads the
rest to the same values (a key written twice: the last one; `1e400`: infinite; `-0`: the integer 0).
Whatever it refuses, the reader decodes again and says why.
`tests/wire/test_fast_reader.py` proves the two give the same value on generated requests.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError
from pydantic_core import SchemaValidator, from_json

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


def plain_reader(pre_read: Mapping[str, Reader]) -> Callable[[bytes], ForwardedRequest | None]:
    """`read_plain`, its narrowed schema built once with the reader's own readers of `sessionApproval`
    and `hops` (`pre_read`, as `read_usual` takes them)."""
    validate = _built(*_plain_schema(pre_read)).validate_json

    def read_plain(data: bytes) -> ForwardedRequest | None:
        """The request `data` holds when it is of the plainest usual shape, read from its bytes in one
        call of pydantic's compiled code; None for any other file (`decode_usual` and `read_usual`
        then read it, else the tolerant reader)."""
        if (len(data) > MAX_REQUEST_BYTES or data.count(b"[") + data.count(b"{") > MAX_WIRE_NESTING
                or b"NaN" in data or b"Infinity" in data):
            # A key written twice keeps its last value: the first is parsed and dropped without the
            # strict decoder's checks of every literal, so a file that might hide one it refuses is
            # read there (campaign5, tests/wire/test_shadowed_values.py).
            return None
        try:
            request: ForwardedRequest = validate(data)
        except ValidationError:
            return None
        if not math.isfinite(request.created_at):
            return None  # `NaN` or `1e400`: the reader refuses the one, the other is read there
        if request.message is None or request.surface is None or request.value is None:
            # A null display string is read as absent: not a field set (`read_usual` leaves it out).
            given = request.__pydantic_fields_set__
            nulls = {name for name in _NULL_AS_ABSENT_FIELDS
                     if name in given and getattr(request, name) is None}
            if nulls:
                object.__setattr__(request, "__pydantic_fields_set__", given - nulls)
        return request

    return read_plain


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


#: The model's names of the display strings read as absent when null.
_NULL_AS_ABSENT_FIELDS = ("message", "surface", "value")


def _forbid_extra(schema: object, models: list[type]) -> None:
    """Every model in `schema` refuses a key it does not read, and reads keys by their wire name only;
    `models` gets their classes."""
    if isinstance(schema, dict):
        if schema.get("type") == "model":
            schema["config"] = {**schema.get("config", {}), "extra_fields_behavior": "forbid",
                                "validate_by_name": False}
            models.append(schema["cls"])
        for key, value in schema.items():
            if key != "cls":
                _forbid_extra(value, models)
    elif isinstance(schema, list):
        for value in schema:
            _forbid_extra(value, models)


def _built(schema: dict[str, Any], models: list[type]) -> SchemaValidator:
    """The validator of `schema` itself. pydantic-core builds a model's part from the model class's
    own validator whenever the class is complete (`__pydantic_complete__`), whatever the schema
    says: the classes are marked incomplete while it is built (once, at import), then complete again.
    `tests/wire/test_fast_reader.py` checks the narrowing holds (an unknown key is refused)."""
    marks = {model: model.__dict__["__pydantic_complete__"] for model in models}
    try:
        for model in marks:
            type.__setattr__(model, "__pydantic_complete__", False)
        return SchemaValidator(schema)
    finally:
        for model, mark in marks.items():
            type.__setattr__(model, "__pydantic_complete__", mark)


_STR: dict[str, Any] = {"type": "str", "strict": True}


def _object(**members: dict[str, Any]) -> dict[str, Any]:
    """An object of these members, all required, and no other (a dict of them, as the JSON holds it)."""
    fields = {name: {"type": "typed-dict-field", "schema": schema, "required": True}
              for name, schema in members.items()}
    return {"type": "typed-dict", "fields": fields, "extra_behavior": "forbid"}


def _strings(*required: str, optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """An object of these string members and no other."""
    schema = _object(**dict.fromkeys(required, _STR))
    schema["fields"].update({name: {"type": "typed-dict-field", "schema": _STR, "required": False}
                             for name in optional})
    return schema


def _array(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "list", "items_schema": items, "min_length": 1, "strict": True}


def _then(schema: dict[str, Any], reader: Reader) -> dict[str, Any]:
    """`schema`'s value (the JSON's own, shaped as the reader expects it), then read by `reader`."""
    return {"type": "function-after", "function": {"type": "no-info", "function": reader}, "schema": schema}


def _plain_schema(pre_read: Mapping[str, Reader]) -> tuple[dict[str, Any], list[type]]:
    """`ForwardedRequest`'s own schema (the same model class, fields and defaults), narrowed to files
    it reads exactly as the tolerant reader does, and the model classes in it:

    - a key the reader does not read is refused (at any depth: an unknown key could hide a literal
      the reader's decoder refuses, `NaN`, a 5,000-digit integer), as is a model's snake_case name;
    - `sessionApproval`, `hops` and `askingUnits` are checked to hold only strings where the reader
      reads them, then read by the reader's own functions (`pre_read`, the model's reader of units);
    - a null `source`, `payload`, `accessIntent`, `sessionApproval`, `hops` or `floor` is refused
      (the reader drops them, with a reason);
    - `accessIntent` is read without its `boundaryValue` check (a Python function), the key being
      required by the model itself: a file without it fails here, and the reader says why.

    Every value is checked against a type of its own: nothing nests deeper than the schema does (the
    parser stops at 200 levels, and the reader's limit is 128), so the nesting needs no count here."""
    models: list[type] = []
    schema: dict[str, Any] = copy.deepcopy(ForwardedRequest.__pydantic_core_schema__)  # type: ignore[arg-type]
    _forbid_extra(schema, models)
    fields = schema["schema"]["fields"]
    for name in ("source", "payload", "access_intent", "session_approval", "hops"):
        nullable = fields[name]["schema"]["schema"]
        assert nullable["type"] == "nullable"
        fields[name]["schema"]["schema"] = nullable["schema"]
    grants = _object(grants=_array(_strings("surface", "pattern")))
    legacy = _object(surface=_STR, patterns={"type": "list", "items_schema": _STR, "strict": True})
    approval = {"type": "union", "mode": "left_to_right", "choices": [grants, legacy]}
    fields["session_approval"]["schema"]["schema"] = _then(approval, pre_read["sessionApproval"])
    hops = _array(_strings("host", "sessionId", "node"))
    fields["hops"]["schema"]["schema"] = _then(hops, pre_read["hops"])
    intent = fields["access_intent"]["schema"]["schema"]
    checked = intent["schema"]
    assert checked["type"] == "function-before"  # `ForwardedAccessIntent._boundary_key_required`
    intent["schema"] = checked["schema"]
    intent_fields = intent["schema"]["fields"]
    assert "default" not in intent_fields["boundary_value"]["schema"]
    units = intent_fields["asking_units"]["schema"]
    assert units["schema"]["type"] == "function-plain"  # `request._read_asking_units`
    read_units = units["schema"]["function"]["function"]
    units["schema"] = _then(_array(_strings("command", optional=("floor",))), read_units)
    intent_fields["floor"]["schema"]["schema"] = {"type": "str"}
    return schema, models
