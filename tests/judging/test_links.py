"""The authorizer chain and the command link, with real executables."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.judging.links import (
    AuthorizerChain,
    CommandLink,
    LinkVerdict,
    allow_is_capped,
    parse_link_spec,
)
from core.rules import AskingUnit, IntentFacts
from core.testing import ManualClock
from tests.helpers import wait_for

BASH = IntentFacts("bash", ("git status",))


def script(tmp_path: Path, body: str) -> tuple[str, ...]:
    path = tmp_path / "link.py"
    path.write_text(textwrap.dedent(body))
    return (sys.executable, str(path))


def echo_link(tmp_path: Path, answer: str, name: str = "judge") -> CommandLink:
    argv = script(tmp_path, f"""
        import json, sys
        facts = json.load(sys.stdin)
        open({str(tmp_path / 'seen.json')!r}, 'w').write(json.dumps(facts))
        print({answer!r})
    """)
    return CommandLink(name, argv, timeout_s=10)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('{"verdict": "allow"}', LinkVerdict("allow")),
        ('{"verdict": "deny", "reason": "not on main"}', LinkVerdict("deny", "not on main")),
        ('{"verdict": "defer", "reason": null}', LinkVerdict("defer")),
    ],
)
async def test_command_link_verdicts(tmp_path: Path, answer: str, expected: LinkVerdict) -> None:
    facts = IntentFacts("bash", ("git push",), None, "<opaque-bash-wrapper>",
                      (AskingUnit("git push", "<opaque-bash-wrapper>"),))
    assert await echo_link(tmp_path, answer).review(facts) == expected
    seen = (tmp_path / "seen.json").read_text()
    assert "requesterCwd" not in seen and "principal" not in seen
    assert '"askingUnits": [{"command": "git push", "floor": "<opaque-bash-wrapper>"}]' in seen


@pytest.mark.parametrize(
    "body",
    [
        "print('not json')",
        "print('[1, 2]')",
        "print('{\"verdict\": \"yes\"}')",
        "print('{\"verdict\": \"deny\", \"reason\": 3}')",
        "import sys; print('{\"verdict\": \"allow\"}'); sys.exit(3)",
        "raise SystemExit('crash')",
        "import os; os.kill(os.getpid(), 9)",
    ],
    ids=["garbage", "not-object", "bad-verdict", "bad-reason", "nonzero", "crash", "killed"],
)
async def test_command_link_failures_defer(
    tmp_path: Path, body: str, caplog: pytest.LogCaptureFixture
) -> None:
    link = CommandLink("judge", script(tmp_path, body), timeout_s=10)
    with caplog.at_level(logging.WARNING, logger="pi_authorizer.chain"):
        assert await link.review(BASH) == LinkVerdict("defer")
    assert "deferred" in caplog.text


async def test_command_link_timeout_kills_the_process(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pid_file = tmp_path / "pid"
    argv = script(tmp_path, f"""
        import os, time
        open({str(pid_file)!r}, 'w').write(str(os.getpid()))
        time.sleep(60)
    """)

    clock = ManualClock()
    with caplog.at_level(logging.WARNING, logger="pi_authorizer.chain"):
        reviewing = asyncio.create_task(CommandLink("slow", argv, timeout_s=0.5, clock=clock).review(BASH))
        # The timeout ends once the process is surely running and the link waits on the clock.
        await wait_for(lambda: pid_file.exists() and pid_file.read_text() != "" and clock.waiting == 1,
                       what="the link started")
        assert not reviewing.done()  # no real time ends the wait: only the clock does
        clock.advance(0.5)
        verdict = await asyncio.wait_for(reviewing, 30)  # a hang guard
    assert verdict == LinkVerdict("defer")
    assert "killed" in caplog.text  # it did not wait for the child's own minute
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_missing_executable_defers(tmp_path: Path) -> None:
    link = CommandLink("ghost", (str(tmp_path / "nope"),))
    assert await link.review(BASH) == LinkVerdict("defer")


@dataclass
class Fixed:
    name: str
    verdict: LinkVerdict
    calls: int = 0

    async def review(self, facts: IntentFacts) -> LinkVerdict:
        self.calls += 1
        return self.verdict


class Broken:
    name = "broken"

    async def review(self, facts: IntentFacts) -> LinkVerdict:
        raise RuntimeError("boom")


async def test_chain_returns_first_non_defer() -> None:
    later = Fixed("later", LinkVerdict("allow"))
    chain = AuthorizerChain([Fixed("a", LinkVerdict("defer")), Broken(),
                             Fixed("b", LinkVerdict("deny", "no")), later])
    decision = await chain.review(BASH)
    assert decision is not None
    assert (decision.link, decision.verdict) == ("b", LinkVerdict("deny", "no"))
    assert later.calls == 0
    assert await AuthorizerChain([Fixed("a", LinkVerdict("defer"))]).review(BASH) is None


@pytest.mark.parametrize("surface", ["path", "path_read", "path_write", "external_directory",
                                     "external_directory_read", "external_directory_write",
                                     "read", "edit", "", "  "])
async def test_path_surface_allow_is_capped_to_defer(tmp_path: Path, surface: str) -> None:
    facts = IntentFacts(surface, ("/etc/passwd",), "/etc/passwd")
    link = echo_link(tmp_path, '{"verdict": "allow"}')
    assert await AuthorizerChain([link]).review(facts) is None
    deny = Fixed("d", LinkVerdict("deny"))
    decision = await AuthorizerChain([link, deny]).review(facts)
    assert decision is not None and decision.link == "d"


async def test_at_a_relaying_node_a_link_may_deny_or_defer_never_allow(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "pi_authorizer")
    allow, deny = Fixed("allow", LinkVerdict("allow")), Fixed("deny", LinkVerdict("deny", "no"))
    assert await AuthorizerChain([allow], relaying=True).review(BASH) is None
    assert "only the node that decides them may allow" in caplog.text
    decision = await AuthorizerChain([allow, deny], relaying=True).review(BASH)
    assert decision is not None and (decision.link, decision.verdict) == ("deny", LinkVerdict("deny", "no"))
    decided = await AuthorizerChain([allow]).review(BASH)  # a node that decides its asks itself
    assert decided is not None and decided.verdict.kind == "allow"


@pytest.mark.parametrize("surface", ["bash", "skill", "mcp", "task"])
def test_known_non_path_surfaces_are_not_capped(surface: str) -> None:
    assert not allow_is_capped(surface)


def test_duplicate_link_names_are_refused() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        AuthorizerChain([Fixed("a", LinkVerdict("defer")), Fixed("a", LinkVerdict("defer"))])


def test_parse_link_spec() -> None:
    link = parse_link_spec("judge=python3 -m my.judge --model 'big one'", timeout_s=2)
    assert link == CommandLink("judge", ("python3", "-m", "my.judge", "--model", "big one"), 2)
    for bad in ("judge", "=cmd", "a b=cmd", "judge=", "judge=   "):
        with pytest.raises(ValueError):
            parse_link_spec(bad)
