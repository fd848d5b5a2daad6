"""Who may do what on the broker: the nats-server users and subject permissions, in one place.

A courier host may publish asks only under its own host token and read or write only its own
decision keys; an approver consumes every ask and writes decisions but never publishes an ask
(`docs/remote.md` § A production server, the threat model). `pi-authorizer broker` writes its
server's configuration from here, so the permissions it runs are the ones tested
(`tests/courier/test_broker_command.py` runs a courier and an approver through them); tightening
them is a change to this module alone. Each user takes its replies on its own inbox prefix
(`_INBOX_<user>`, what `BrokerAccess` connects with) and may subscribe to that one only: a user
allowed `_INBOX.>` would read every other user's replies (asks fetched, verdicts read).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.courier.broker import ASK_PREFIX, ASK_STREAM, DECISION_BUCKET, token
from core.courier.broker_access import inbox_prefix_of


def replies_of(user: str) -> str:
    """The subjects `user`'s replies arrive on (its own inbox prefix, never the shared `_INBOX.>`)."""
    prefix = inbox_prefix_of(user)
    if prefix is None:
        raise ValueError(f"{user!r} cannot name an inbox prefix")
    return f"{prefix}.>"


def inbox_prefix(user: str) -> str:
    """The reply prefix `user` connects with and alone may subscribe under (its access file's
    `inbox_prefix`)."""
    return replies_of(user).removesuffix(".>")


@dataclass(frozen=True)
class BrokerUser:
    """One nats-server user: its name, its password and what it may publish and subscribe to
    (`None`: everything, for the broker's own administrator that lays the stream and bucket out)."""

    name: str
    password: str
    permissions: dict[str, Any] | None


def courier_user(host: str) -> str:
    """The user a courier host connects as (its host token: one name per host, never two)."""
    return f"courier-{token(host)}"


def approver_user(name: str) -> str:
    return f"approver-{token(name)}"


def courier_permissions(host: str) -> dict[str, Any]:
    """Publish its own asks, read and write its own decision keys (create-only by the client) and read
    their history (a consumer filtered on its own keys, delivering to its own inbox prefix), read the
    layout's info; nothing of another host's."""
    own = token(host)
    keys = f"$KV.{DECISION_BUCKET}.{own}.>"
    return {
        "publish": {"allow": [
            f"{ASK_PREFIX}.{own}.>",
            keys,
            f"$JS.API.STREAM.INFO.{ASK_STREAM}",
            f"$JS.API.STREAM.INFO.KV_{DECISION_BUCKET}",
            f"$JS.API.DIRECT.GET.KV_{DECISION_BUCKET}.{keys}",
            # a key's history (its first value): a consumer whose create subject names its filter
            f"$JS.API.CONSUMER.CREATE.KV_{DECISION_BUCKET}.*.{keys}",
        ]},
        "subscribe": {"allow": [keys, replies_of(courier_user(host))]},
    }


def approver_permissions(name: str) -> dict[str, Any]:
    """Consume every ask, write and read every decision; never publish an ask (approver `name`)."""
    return {
        "publish": {
            "allow": [f"$KV.{DECISION_BUCKET}.>", "$JS.API.>", f"$JS.ACK.{ASK_STREAM}.>"],
            "deny": [f"{ASK_PREFIX}.>"],
        },
        "subscribe": {"allow": [f"$KV.{DECISION_BUCKET}.>", replies_of(approver_user(name))]},
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
