"""The non-terminal judges that run after recorded authority and before the person.

The chain's rules are in `docs/design/contract.md` § Chain.

Links see only the facts (`IntentFacts`: surface, match values, boundary value, floor and asking
units), never `requesterCwd` or the principal. The chain returns the first verdict that is not `defer`.

Delegation envelope: a link's `allow` is capped to `defer` unless the surface is a known
non-path surface. Capped are the `path` and `external_directory` families (the reference's
excluded set), the path-bearing tool surfaces (read, write, edit, find, grep, ls; this node is
stricter than the reference there) and an empty or undeterminable surface (the contract counts
an unknown surface as excluded). Everything else — bash, skill, mcp and other tool names — is
"known" in the sense that its single value is already portable and no path meaning is at stake.
A link's `deny` is never capped.

Relaying (`docs/remote.md` § The courier, node-locality): at a node that carries its undecided
asks to another (`--forward-to`), only recorded authority resolves locally; live authority converges
where the ask is adjudicated. There every link's `allow` counts as `defer`
(`AuthorizerChain(relaying=True)`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shlex
import signal
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from core.clock import SYSTEM_CLOCK, Clock
from core.rules.model import PATH_SURFACES
from core.wire.facts import IntentFacts

log = logging.getLogger("pi_authorizer.chain")
T = TypeVar("T")

LinkVerdictKind = Literal["allow", "deny", "defer"]
DEFAULT_LINK_TIMEOUT_S = 30.0
_MAX_OUTPUT = 64 * 1024


def facts_json(facts: IntentFacts) -> dict[str, object]:
    """The wire-shaped facts a command link receives on stdin."""
    data: dict[str, object] = {
        "surface": facts.surface,
        "matchValues": list(facts.match_values),
        "boundaryValue": facts.boundary_value,
    }
    if facts.floor is not None:
        data["floor"] = facts.floor
    if facts.asking_units is not None:
        data["askingUnits"] = [
            {"command": u.command, **({"floor": u.floor} if u.floor is not None else {})}
            for u in facts.asking_units
        ]
    return data


@dataclass(frozen=True, slots=True)
class LinkVerdict:
    """A link's answer; `reason` is relayed to the agent on a deny."""

    kind: LinkVerdictKind
    reason: str | None = None


DEFER = LinkVerdict("defer")


class Link(Protocol):
    """One named judge in the chain."""

    @property
    def name(self) -> str: ...

    async def review(self, facts: IntentFacts) -> LinkVerdict: ...


@dataclass(frozen=True, slots=True)
class ChainDecision:
    """The first non-defer verdict and the link that gave it."""

    link: str
    verdict: LinkVerdict


def allow_is_capped(surface: str) -> bool:
    """True when a link's allow on `surface` must become a defer (see the module docstring)."""
    return not surface.strip() or surface in PATH_SURFACES


class AuthorizerChain:
    """Consult links in order; the first allow or deny wins, a capped allow counts as defer."""

    def __init__(self, links: Sequence[Link], relaying: bool = False) -> None:
        names = [link.name for link in links]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate link names in {names}")
        self.links = tuple(links)
        #: This node carries what is left to another: a link may deny or defer here, never allow.
        self.relaying = relaying

    async def review(self, facts: IntentFacts) -> ChainDecision | None:
        """The deciding link's verdict, or None when every link deferred."""
        for link in self.links:
            try:
                verdict = await link.review(facts)
            except Exception as exc:
                log.warning("link %r failed, deferring: %r", link.name, exc)
                continue
            if verdict.kind == "allow" and allow_is_capped(facts.surface):
                log.info("link %r allow on %r capped to defer", link.name, facts.surface)
                continue
            if verdict.kind == "allow" and self.relaying:
                log.info("link %r allow capped to defer: this node relays its asks (--forward-to), and "
                         "only the node that decides them may allow", link.name)
                continue
            if verdict.kind != "defer":
                return ChainDecision(link.name, verdict)
        return None


@dataclass(frozen=True)
class CommandLink:
    """A link backed by an external executable; see the module docstring for its protocol."""

    name: str
    argv: tuple[str, ...]
    timeout_s: float = DEFAULT_LINK_TIMEOUT_S
    clock: Clock = SYSTEM_CLOCK
    """`timeout_s` is waited out on it: a test's `ManualClock` ends the wait when the test advances it."""

    async def review(self, facts: IntentFacts) -> LinkVerdict:
        """Run the command once for `facts`; every failure is a logged defer."""
        payload = json.dumps(facts_json(facts)).encode()
        try:
            process = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            return self._defer(f"could not start {self.argv[0]!r}: {exc}")
        try:
            stdout, stderr = await _before(process.communicate(payload), self._deadline())
        except TimeoutError:
            await _kill(process)
            return self._defer(f"no answer within {self.timeout_s}s; killed")
        if process.returncode != 0:
            tail = stderr.decode(errors="replace").strip()[-200:]
            return self._defer(f"exit status {process.returncode}: {tail}")
        return self._parse(stdout)

    async def _deadline(self) -> None:
        await self.clock.wait(asyncio.Event(), self.timeout_s)

    def _parse(self, stdout: bytes) -> LinkVerdict:
        if len(stdout) > _MAX_OUTPUT:
            return self._defer(f"output over {_MAX_OUTPUT} bytes")
        try:
            answer = json.loads(stdout)
        except ValueError:
            return self._defer(f"output is not JSON: {stdout[:200]!r}")
        if not isinstance(answer, dict) or answer.get("verdict") not in ("allow", "deny", "defer"):
            return self._defer(f"output has no valid verdict: {stdout[:200]!r}")
        reason = answer.get("reason")
        if reason is not None and not isinstance(reason, str):
            return self._defer("reason is not a string")
        kind: LinkVerdictKind = answer["verdict"]
        return LinkVerdict(kind, reason)

    def _defer(self, why: str) -> LinkVerdict:
        log.warning("link %r deferred: %s", self.name, why)
        return DEFER


async def _before(work: Awaitable[T], deadline: Awaitable[None]) -> T:
    """`work`'s result, or `TimeoutError` when `deadline` ends first; the other one is cancelled."""
    task, timer = asyncio.ensure_future(work), asyncio.ensure_future(deadline)
    try:
        done, _ = await asyncio.wait((task, timer), return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
        if not task.done():
            task.cancel()
    if task not in done:
        raise TimeoutError
    return task.result()


async def _kill(process: asyncio.subprocess.Process) -> None:
    """Kill the link's whole process group (it was started in its own session), then reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    await process.wait()


def parse_link_spec(
    spec: str, timeout_s: float = DEFAULT_LINK_TIMEOUT_S, clock: Clock = SYSTEM_CLOCK
) -> CommandLink:
    """`"name=command args"` (shell-style quoting, no shell) as a `CommandLink`."""
    name, sep, command = spec.partition("=")
    name = name.strip()
    if not sep or not name or any(c.isspace() for c in name):
        raise ValueError(f"link spec {spec!r} must look like NAME=COMMAND")
    argv = tuple(shlex.split(command))
    if not argv:
        raise ValueError(f"link spec {spec!r} has no command")
    return CommandLink(name, argv, timeout_s, clock)
