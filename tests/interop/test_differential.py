"""Differential test: pi-authorizer's resolution against the real 20.7.3 `PermissionManager`.

A seeded generator (`differential.py`) writes configs (global, project, agent and project agent
files) and facts; both judge every case over the same files. Verdict and winning rule (pattern
and origin) must agree, except for the documented deliberate differences (`docs/design/fidelity.md`),
where pi-authorizer must be strictly MORE restrictive and the case must carry the tag of a
documented difference. A disagreement is shrunk (files, surfaces, patterns, lines and values
dropped while it persists) and printed as a reproduction.

More cases: `DIFFERENTIAL_CASES=50000 uv run pytest tests/interop/test_differential.py`
(`DIFFERENTIAL_SEED` picks another reproducible stream).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from core.rules.jsonc import loads_jsonc
from core.rules.model import more_restrictive
from tests.interop.differential import generate
from tests.interop.harness import NodeDriver
from tests.interop.reference import GLOBAL, Case, Verdict, agent_file, our_verdict, reference_verdicts

pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("differential"), pytest.mark.timeout(900)]

# Issue 11 asks for a few thousand cases in the default run. Bigger runs: DIFFERENTIAL_CASES.
CASES = int(os.environ.get("DIFFERENTIAL_CASES", "3000"))
SEED = int(os.environ.get("DIFFERENTIAL_SEED", "20261203"))
SHRINK_ROUNDS = 12
DOCUMENTED = frozenset({
    "integer-key", "non-bmp", "tool-values", "agent-unknown", "agent-odd", "frontmatter-tab",
    "frontmatter-ragged", "frontmatter-open-space", "frontmatter-crlf", "frontmatter-empty-map",
    "frontmatter-long-reason", "frontmatter-comment", "frontmatter-colon-key", "frontmatter-escape",
    "frontmatter-malformed", "directional", "padded-surface", "wildcard-member",
    # found by scripts/fidelity_unseen.py
    "rejected-file", "bad-utf8", "proto-key", "frontmatter-proto", "surface-home",
})


def _global(permission: dict[str, object]) -> dict[str, str]:
    return {GLOBAL: json.dumps({"permission": permission})}


# Disagreements found by the independent campaign (`scripts/fidelity_campaign.py`), each one a bug
# where pi-authorizer was looser than pi; now pi-authorizer must give pi's verdict and rule.
FIXED: dict[str, Case] = {
    "agent name with a zero-width joiner: pi opens its file, whose deny applies": Case(
        {**_global({"bash": "allow"}), agent_file("a\u200db"): "---\npermission:\n  bash: deny\n---\n"},
        "a\u200db", "bash", ("ls",)),
    "agent name with a tab": Case(
        {**_global({"*": "allow"}),
         agent_file("tab\tname", project=True): "---\npermission:\n  skill: deny\n---\n"},
        "tab\tname", "skill", ("lint",)),
    "agent name with a path separator: pi opens agents/sub/x.md": Case(
        {**_global({"bash": "allow"}),
         agent_file("sub/x"): "---\npermission:\n  bash:\n    '*': deny\n---\n"},
        "sub/x", "bash", ("ls",)),
    "padded bash surface: pi trims the tool name and judges an empty command": Case(
        _global({"*": "allow", "bash": "deny"}), "Explore", "bash ", ("ls",)),
    "padded skill surface: pi judges a skill without a name": Case(
        _global({"*": "allow", "skill": {"*": "deny", "lint": "allow"}}), "Explore", " skill", ("lint",)),
    "wildcard surface key on a family ask (pi does not fold)": Case(
        _global({"*": "allow", "*_directory": "deny"}), "Explore", "external_directory", ("/x",)),
    "directional ask: an agent file pi does not read grants nothing": Case(
        {**_global({"*": "ask"}),
         agent_file("Explore"): "---\npermission:  # rules\n  external_directory_write: allow\n---\n"},
        "Explore", "external_directory_write", ("/x",)),
}


def _acceptable(ours: Verdict, theirs: Verdict, tags: frozenset[str]) -> bool:
    """Equal, or a documented difference on which pi-authorizer is the stricter."""
    if ours == theirs:
        return True
    return bool(tags & DOCUMENTED) and more_restrictive(ours.state, theirs.state)  # type: ignore[arg-type]


def _judge(driver: NodeDriver, cases: list[Case], folder: Path) -> list[tuple[Verdict, Verdict]]:
    written = [(case, case.write(folder / f"c{index}")) for index, case in enumerate(cases)]
    theirs = reference_verdicts(driver, written)
    return [(our_verdict(case, root), verdict) for (case, root), verdict in zip(written, theirs, strict=True)]


def _smaller(case: Case) -> Iterator[Case]:
    """Each case one step smaller than `case`."""
    for name, text in case.files.items():
        yield replace(case, files={k: v for k, v in case.files.items() if k != name})
        if name.endswith(".json"):
            try:  # JSONC, or a knob or `$schema` beside the rules: shrink what parses
                permission = loads_jsonc(text)["permission"]  # type: ignore[index]
            except (ValueError, KeyError, TypeError):
                continue
            for surface, value in permission.items():
                rest = {k: v for k, v in permission.items() if k != surface}
                yield replace(case, files={**case.files, name: json.dumps({"permission": rest})})
                if isinstance(value, dict) and len(value) > 1:
                    for pattern in value:
                        fewer = {**permission, surface: {k: v for k, v in value.items() if k != pattern}}
                        yield replace(case, files={**case.files, name: json.dumps({"permission": fewer})})
        else:
            lines = text.split("\n")
            for index in range(1, len(lines)):
                if lines[index].strip() and lines[index].strip() not in ("---", "permission:"):
                    shorter = "\n".join(lines[:index] + lines[index + 1:])
                    yield replace(case, files={**case.files, name: shorter})
    if len(case.values) > 1:
        for index in range(len(case.values)):
            yield replace(case, values=case.values[:index] + case.values[index + 1:])


def _shrink(
    driver: NodeDriver, case: Case, tags: frozenset[str], folder: Path
) -> tuple[Case, Verdict, Verdict]:
    """Greedily drop parts of `case` while the disagreement persists (one node run per round)."""
    ours, theirs = _judge(driver, [case], folder / "start")[0]
    for round_number in range(SHRINK_ROUNDS):
        variants = list(_smaller(case))
        if not variants:
            break
        results = _judge(driver, variants, folder / f"round{round_number}")
        found = next(((v, r) for v, r in zip(variants, results, strict=True)
                      if not _acceptable(*r, tags)), None)
        if found is None:
            break
        case, (ours, theirs) = found
    return case, ours, theirs


def test_resolution_agrees_with_the_reference(node_driver: NodeDriver, tmp_path: Path) -> None:
    generated = generate(SEED, CASES)
    results = _judge(node_driver, [case for case, _ in generated], tmp_path / "cases")
    documented: Counter[str] = Counter()
    for (case, tags), (ours, theirs) in zip(generated, results, strict=True):
        if ours == theirs:
            continue
        if _acceptable(ours, theirs, tags):
            documented.update(tags & DOCUMENTED)
            continue
        small, small_ours, small_theirs = _shrink(node_driver, case, tags, tmp_path / "shrink")
        pytest.fail(
            f"pi-authorizer and pi 20.7.3 disagree (seed {SEED}, {CASES} cases; tags {sorted(tags)}):\n"
            f"{small.reproduction(small_ours, small_theirs)}\n\noriginal case:\n"
            f"{case.reproduction(ours, theirs)}"
        )
    agreeing = sum(ours == theirs for ours, theirs in results)
    print(f"differential: {agreeing}/{CASES} identical, documented stricter: {dict(documented)}")
    assert agreeing >= CASES * 0.95


@pytest.fixture(scope="module")
def fixed_verdicts(
    node_driver: NodeDriver, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[Verdict, Verdict]]:
    """Every fixed case judged by both, the reference in one node run."""
    results = _judge(node_driver, list(FIXED.values()), tmp_path_factory.mktemp("fixed"))
    return dict(zip(FIXED, results, strict=True))


@pytest.mark.parametrize("name", sorted(FIXED))
def test_fixed_disagreements_stay_fixed(
    name: str, fixed_verdicts: dict[str, tuple[Verdict, Verdict]]
) -> None:
    case = FIXED[name]
    ours, theirs = fixed_verdicts[name]
    expected = "ask" if name.startswith("directional") else "deny"
    assert theirs.state == expected, case.reproduction(ours, theirs)
    assert ours == theirs, case.reproduction(ours, theirs)
