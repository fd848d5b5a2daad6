"""How a node proves who it is to the broker, and over what: `--broker-access FILE`.

A production broker gives each courier host and each approver its own credentials with subject
permissions, over TLS (`docs/remote.md` § A production server). Secrets never go on the command
line (other users read it in `ps`) nor in the URL: they live in a small TOML file only its owner
may read, naming a user and password (or a password file), or a NATS `.creds` file, and the TLS
files (a CA to verify the server, and a client certificate and key where the server verifies
clients). Read once at start; every problem is one line naming the file and the key.
"""

from __future__ import annotations

import re
import ssl
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.courier.signing import NodeKey, SigningRefused, decode_public, node_key, read_node_key
from core.disk.private import NotPrivate, read_private

#: The keys the file may hold; any other is refused (a typo must not silently drop a protection).
KEYS = frozenset({"user", "password", "password_file", "creds", "ca", "cert", "key", "inbox_prefix",
                  "node_key", "approvers", "couriers"})
#: The keys that hold tables of trusted public keys (`name = "U…"`), not strings.
TRUST_KEYS = ("approvers", "couriers")
#: An access file or a password file larger than this is not one.
MAX_BYTES = 64 * 1024
#: Where a node's replies come back (`_INBOX_<user>` unless the file says): a subject of its own, so
#: the server can let each user subscribe to its own replies only (never `_INBOX.>`, where every
#: other node's replies pass: its asks fetched, its verdicts read).
_PREFIX = re.compile(r"^[A-Za-z0-9_=-]+(\.[A-Za-z0-9_=-]+)*$")


def inbox_prefix_of(user: str) -> str | None:
    """`_INBOX_<user>`: the reply prefix a user connects with unless its access file names one (`None`
    when the user's name cannot be one subject token)."""
    return f"_INBOX_{user}" if _PREFIX.match(user) and "." not in user else None


class BrokerAccessError(ValueError):
    """The access file cannot be used; the message is one line for the command line."""


@dataclass(frozen=True)
class BrokerAccess:
    """Credentials and TLS for the broker connection (all optional: none is a loopback broker)."""

    user: str | None = None
    password: str | None = None
    creds: Path | None = None
    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    #: The reply subject prefix (`inbox_prefix`); `None`: `_INBOX_<user>` with a user, else nats-py's.
    inbox_prefix: str | None = None
    #: The approvers whose signed verdicts a courier relays (`[approvers]`: name = public key), as
    #: (public key, name) pairs (`core/courier/signing.py`).
    approvers: tuple[tuple[str, str], ...] = ()
    #: The couriers whose signed withdrawals an approver believes (`[couriers]`).
    couriers: tuple[tuple[str, str], ...] = ()
    #: This node's key pair's seed (`node_key`, written by `pi-authorizer broker`), instead of the one
    #: made in its state dir (`<state>/node.nk`), so the trust lists written with it already hold it.
    node_key: Path | None = None

    def trusted(self, which: str) -> dict[str, str]:
        """`approvers` or `couriers` as public key → node name."""
        return dict(self.approvers if which == "approvers" else self.couriers)

    @property
    def replies(self) -> str | None:
        """The inbox prefix this node connects with (`docs/remote.md` § A production server)."""
        if self.inbox_prefix is not None:
            return self.inbox_prefix
        return None if self.user is None else inbox_prefix_of(self.user)

    @property
    def tls(self) -> bool:
        return self.ca is not None or self.cert is not None

    def connect_options(self) -> dict[str, Any]:
        """What `nats.connect` takes for these (no secret is logged: nats-py never prints them)."""
        options: dict[str, Any] = {}
        if self.user is not None:
            options["user"] = self.user
            options["password"] = self.password
        if self.creds is not None:
            options["user_credentials"] = str(self.creds)
        if self.replies is not None:
            options["inbox_prefix"] = self.replies
        if self.tls:
            context = ssl.create_default_context(cafile=None if self.ca is None else str(self.ca))
            if self.cert is not None:
                context.load_cert_chain(str(self.cert), None if self.key is None else str(self.key))
            options["tls"] = context
        return options


def read_broker_access(path: Path) -> BrokerAccess:
    """The access file at `path`: TOML with the `KEYS`; refused when others may read it (it holds a
    secret), when a key is unknown or mistyped, or when a file it names is missing."""
    data = _private_bytes(path, "access file")
    try:
        table = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BrokerAccessError(f"{path}: not TOML ({exc})") from exc
    unknown = sorted(set(table) - KEYS)
    if unknown:
        raise BrokerAccessError(f"{path}: unknown key {unknown[0]!r} (known: {', '.join(sorted(KEYS))})")
    for name, value in table.items():
        if name in TRUST_KEYS:
            continue
        if not isinstance(value, str) or not value:
            raise BrokerAccessError(f"{path}: {name} must be a non-empty string")
    trust = {name: _trusted(path, name, table.get(name, {})) for name in TRUST_KEYS}
    files = {name: _file(path, name, table[name])
             for name in ("password_file", "creds", "ca", "cert", "key", "node_key") if name in table}
    password = table.get("password")
    if "password_file" in files:
        if password is not None:
            raise BrokerAccessError(f"{path}: password and password_file both set: keep one")
        password = _private_bytes(files["password_file"], "password file").decode("utf-8", "replace").strip()
    user = table.get("user")
    if (user is None) != (password is None):
        raise BrokerAccessError(f"{path}: user and a password go together")
    if user is not None and "creds" in files:
        raise BrokerAccessError(f"{path}: user/password and creds both set: keep one")
    if "key" in files and "cert" not in files:
        raise BrokerAccessError(f"{path}: key without cert")
    prefix = table.get("inbox_prefix")
    if prefix is not None and (not _PREFIX.match(prefix) or prefix == "_INBOX"):
        raise BrokerAccessError(f"{path}: inbox_prefix must be subject tokens of [A-Za-z0-9_-] joined by "
                                "dots, and not the shared _INBOX")
    return BrokerAccess(user, password, files.get("creds"), files.get("ca"), files.get("cert"),
                        files.get("key"), prefix, trust["approvers"], trust["couriers"],
                        files.get("node_key"))


def node_key_of(access: BrokerAccess | None, state_dir: Path, name: str) -> NodeKey:
    """The key this node signs with as `name`: the access file's `node_key` when it names one, else the
    one made at its first start in its state dir. Raises `SigningRefused` or `OSError` with why."""
    if access is not None and access.node_key is not None:
        return read_node_key(access.node_key, name)
    return node_key(state_dir, name)


def _trusted(path: Path, what: str, value: object) -> tuple[tuple[str, str], ...]:
    """A `[approvers]` or `[couriers]` table (node name = its public key, `U…`), as (key, name) pairs;
    a value that is no public key is refused naming its entry (a key is public: quoting it is safe)."""
    if not isinstance(value, dict):
        raise BrokerAccessError(f"{path}: {what} must be a table of node name = public key (U…)")
    pairs: list[tuple[str, str]] = []
    for name, key in value.items():
        if not isinstance(key, str):
            raise BrokerAccessError(f"{path}: {what}.{name} must be a public key (U…)")
        try:
            decode_public(key)
        except SigningRefused as exc:
            raise BrokerAccessError(f"{path}: {what}.{name}: {exc}") from exc
        pairs.append((key.strip(), name))
    return tuple(pairs)


def _file(base: Path, name: str, value: str) -> Path:
    found = Path(value).expanduser()
    found = found if found.is_absolute() else base.parent / found  # relative to the access file
    if not found.is_file():
        # the value is never echoed: a password written where a path goes must not reach a log
        raise BrokerAccessError(f"{base}: {name} does not name a file (its value is not shown: it may be "
                                "a secret written under the wrong key)")
    return found


def _private_bytes(path: Path, what: str) -> bytes:
    """A secret's bytes, refused when the file is readable by others or is not a small regular file."""
    try:
        return read_private(path, what, MAX_BYTES)
    except NotPrivate as exc:
        raise BrokerAccessError(str(exc)) from exc
