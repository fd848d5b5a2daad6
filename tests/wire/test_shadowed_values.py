"""A value hidden under a key written twice is refused by the plain path as by the tolerant reader
(campaign5, issue 37's sixth pass; found by `test_fast_reader`'s own property test under load; the
plain path now leaves any file holding `NaN`, `Infinity` or more brackets than the limit to the
reader).

`read_plain` validates a file's bytes into the model in one call of pydantic's compiled code. A key
written twice keeps its last value; the first is parsed and dropped without the checks the tolerant
reader's strict decoder makes on every literal (`NaN`, `Infinity`, nesting past `MAX_WIRE_NESTING`).
So a file the tolerant reader refuses ("not valid JSON: ...", quarantined, its child told why) is
read and served on the plain path, and judged, while any other reader of it (pi's own `JSON.parse`)
refuses it too: the rejection and its reason are lost.
"""

from __future__ import annotations

import pytest

from core.wire.reader import RequestRejected, parse_request, read_tolerantly

REST = b'"requesterSessionId":"s","targetSessionId":"t","requesterAgentName":"Explore"}'
HIDDEN = {
    "NaN": b"NaN",
    "Infinity": b"-Infinity",
    "a deep array": b"[" * 130 + b"]" * 130,
    "a deep object": b'{"a":' * 130 + b"1" + b"}" * 130,
}


def outcome(data: bytes) -> tuple[str, object]:
    try:
        return ("read", parse_request(data))
    except RequestRejected as exc:
        return ("rejected", exc.reason)


@pytest.mark.parametrize("key", ["createdAt", "id"])
@pytest.mark.parametrize("hidden", list(HIDDEN))
def test_a_literal_hidden_under_a_key_written_twice_is_refused_as_the_tolerant_reader_refuses_it(
    hidden: str, key: str,
) -> None:
    data = b'{"%s":%s,"id":"x","createdAt":0,%s' % (key.encode(), HIDDEN[hidden], REST)
    with pytest.raises(RequestRejected) as refused:
        read_tolerantly(data)
    assert outcome(data) == ("rejected", refused.value.reason)
