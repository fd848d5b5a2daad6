"""Who may do what on the broker: the nats-server users and subject permissions, in one place.

A courier host may publish asks only under its own host token and read or write only its own
decision keys; an approver consumes every ask and writes decisions but never publishes an ask
(`docs/remote.md` § A production server, the threat model). `pi-authorizer broker` writes its
server's configuration from here, so the permissions it runs are the ones tested
(`tests/courier/test_broker_command.py` runs a courier and an approver through them); tightening
them further is a change to this module alone. Each user takes its replies on a prefix of its own
(`inbox_prefix`, written into its access file), never the shared `_INBOX.>`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.courier.broker import ASK_PREFIX, ASK_STREAM, DECISION_BUCKET, token

#: Replies (request answers, acknowledgements, fetched asks) arrive under a prefix of each user's own:
#: a user allowed the shared `_INBOX.>` would read every other user's replies.
_PLAIN = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass(frozen=True)
class BrokerUser:
    """One nats-server user: its name, its password and what it may publish and subscribe to
    (`None`: everything, for the broker's own administrator that lays the stream and bucket out)."""

    name: str
    password: str
    permissions: dict[str, Any] | None


def inbox_prefix(user: str) -> str:
    """The reply prefix `user` connects with and alone may subscribe under: `_INBOX_<user>` (what a
    node takes by default), or, for a name that is not one plain token, one made of its digest."""
    if _PLAIN.match(user):
        return f"_INBOX_{user}"
    return f"_INBOX_{hashlib.sha256(user.encode('utf-8')).hexdigest()[:24]}"


def courier_user(host: str) -> str:
    """The user a courier host connects as (its host token: one name per host, never two)."""
    return f"courier-{token(host)}"


def approver_user(name: str) -> str:
    return f"approver-{token(name)}"


def courier_permissions(host: str) -> dict[str, Any]:
    """Publish its own asks, read and write its own decision keys (create-only by the client), read
    the layout's info; nothing of another host's."""
    own = token(host)
    keys = f"$KV.{DECISION_BUCKET}.{own}.>"
    return {
        "publish": {"allow": [
            f"{ASK_PREFIX}.{own}.>",
            keys,
            f"$JS.API.STREAM.INFO.{ASK_STREAM}",
            f"$JS.API.STREAM.INFO.KV_{DECISION_BUCKET}",
            f"$JS.API.DIRECT.GET.KV_{DECISION_BUCKET}.{keys}",
        ]},
        "subscribe": {"allow": [keys, f"{inbox_prefix(courier_user(host))}.>"]},
    }


def approver_permissions(name: str) -> dict[str, Any]:
    """Consume every ask, write and read every decision; never publish an ask."""
    return {
        "publish": {
            "allow": [f"$KV.{DECISION_BUCKET}.>", "$JS.API.>", f"$JS.ACK.{ASK_STREAM}.>"],
            "deny": [f"{ASK_PREFIX}.>"],
        },
        "subscribe": {"allow": [f"$KV.{DECISION_BUCKET}.>", f"{inbox_prefix(approver_user(name))}.>"]},
    }


def authorization_block(users: Sequence[BrokerUser]) -> str:
    """The `authorization` section of a nats-server configuration for `users` (JSON values, which
    the configuration format reads as they are; quoted, so a `$` is never a variable)."""
    entries = []
    for user in users:
        entry: dict[str, Any] = {"user": user.name, "password": user.password}
        if user.permissions is not None:
            entry["permissions"] = user.permissions
        entries.append("    " + json.dumps(entry))
    return "authorization {\n  users = [\n" + "\n".join(entries) + "\n  ]\n}\n"
