"""Real config files in a temporary folder, for the rules tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from core.rules import IntentFacts, PolicyStore, Resolution, resolve_with_policy

HOME = "/home/me"


class Layout:
    """An agent dir and a project dir under `root`, with writers for each config layer."""

    def __init__(self, root: Path) -> None:
        self.agent_dir = root / "agent"
        self.project = root / "project"
        self.agent_dir.mkdir(parents=True, exist_ok=True)
        self.project.mkdir(parents=True, exist_ok=True)

    @property
    def global_config(self) -> Path:
        return self.agent_dir / "extensions" / "pi-permission-system" / "config.json"

    @property
    def project_config(self) -> Path:
        return self.project / ".pi" / "extensions" / "pi-permission-system" / "config.json"

    def agent_file(self, name: str, *, project: bool = False) -> Path:
        base = self.project / ".pi" if project else self.agent_dir
        return base / "agents" / f"{name}.md"

    def write(self, path: Path, content: str | dict[str, Any]) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        return path

    def write_global(self, content: str | dict[str, Any]) -> Path:
        return self.write(self.global_config, content)

    def write_project(self, content: str | dict[str, Any]) -> Path:
        return self.write(self.project_config, content)

    def write_agent(self, name: str, frontmatter: str, *, project: bool = False) -> Path:
        return self.write(self.agent_file(name, project=project), f"---\n{frontmatter}---\n# {name}\n")

    def store(self, rules_file: Path | None = None) -> PolicyStore:
        return PolicyStore(self.agent_dir, self.project, rules_file, home=HOME)


def resolve(
    store: PolicyStore,
    surface: str,
    *values: str,
    agent: str = "Explore",
    **extra: Any,
) -> Resolution:
    """Resolve one ask with the given surface and match values."""
    facts = IntentFacts(surface=surface, match_values=tuple(values), **extra)
    return resolve_with_policy(store.policy(agent), facts)


HIDDEN = "contains control or hidden characters"



#: The odd names both former checks knew of, and the reason each now gets.
ODD_NAMES = {
    "": "empty agent name",
    " \t": "empty agent name",
    "unknown": "named 'unknown' (the child could not tell its agent name)",
    " Unknown ": "named 'unknown' (the child could not tell its agent name)",
    "a\x00b": "contains NUL",
    "sub/x": "contains a path separator",
    "sub\\x": "contains a path separator",
    "..": "contains '..'",
    "a..b": "contains '..'",
    "a\ud800b": "contains a lone surrogate (no file can have that name)",
    "a\tb": HIDDEN,
    "a\nb": HIDDEN,
    "a\x1b[31mb": HIDDEN,
    "a\u200db": HIDDEN,  # zero-width joiner
    "a\u202eb": HIDDEN,  # right-to-left override
    "a\u00a0b": HIDDEN,  # no-break space
    "a\u3164b": HIDDEN,  # Hangul filler (default-ignorable, not Cf)
    "a\ue000b": HIDDEN,  # private use
}



USABLE = ["Explore", "code-reviewer.v2", "a" * 200, "Prüfer", "エージェント"]


# -- hostile configs and facts, for the tests that compare a fast judgment with the full one -------

#: Surface keys of a config: exact surfaces, families and members, tools, wildcards over surfaces.
RULE_SURFACES = ("bash", "skill", "path", "path_read", "path_write", "external_directory",
                 "external_directory_read", "read", "write", "mcp", "tool", "ba*", "*_read", "pa?h", "*")
#: Patterns: prefixes, globs, `?`, home forms, array-index keys (pi orders them first), beyond the BMP.
RULE_PATTERNS = st.sampled_from([
    "*", "git *", "git push *", "rm *", "rm -f *", "/tmp/*", "/etc/*", "~/*", "${HOME}/x", "$HOME/*", "42",
    "7", "ls", "a?c", "*x*", "/cache/?", "\U0001f600*", "?", "", " *", "srv:*", "make *", "ls *",
]) | st.text(alphabet="git*? /~42\U0001f600#", max_size=6)
RULE_ACTIONS = st.sampled_from(["allow", "deny", "ask", "maybe"]) | st.builds(
    lambda reason: {"action": "deny", "reason": reason}, st.sampled_from(["no", "", "  ", "not \U0001f600"]))
PERMISSIONS = st.dictionaries(
    st.sampled_from(RULE_SURFACES), st.dictionaries(RULE_PATTERNS, RULE_ACTIONS, max_size=4) | RULE_ACTIONS,
    max_size=5)
CONFIG = st.fixed_dictionaries({"permission": PERMISSIONS}, optional={"yoloMode": st.booleans()})
#: An agent file's frontmatter (agent files set rules, never knobs).
AGENT_RULES = st.lists(st.tuples(st.sampled_from(["bash", "path", "read", "skill", "path_write"]),
                                 st.sampled_from(["ls *", "git *", "/tmp/*", "rm -rf *", "*", "7"]),
                                 st.sampled_from(["allow", "deny", "ask"])), max_size=4)
#: What a session grant records: `(surface, pattern)`.
GRANTS = st.lists(st.tuples(st.sampled_from(["bash", "path", "read", "mcp", "skill", "path_read", "tool"]),
                            st.sampled_from(["rm *", "make *", "git *", "/etc/*", "/tmp/*", "*", "other:*",
                                             "ls"])), max_size=3)
#: Surfaces as children send them: padded, odd, empty, beyond the BMP.
ASK_SURFACES = st.sampled_from(["bash", "bash ", " bash", "skill", " skill", "path", "path_read",
                                "path_write", "external_directory", "external_directory_read", "mcp", "mcp ",
                                "read", " read", "write", "tool", "", "\U0001f600", "pa\u00e9h"])
ASK_VALUES = st.text(alphabet="git rm42/7tmpec~?\U0001f600\u00e9*.-fl#\n\ufeff\t", max_size=12)
#: Values of one ask: few, none, or many.
ASK_VALUE_LISTS = st.lists(ASK_VALUES, max_size=4) | st.lists(ASK_VALUES, min_size=20, max_size=60)
ASK_FLOORS = st.none() | st.sampled_from(["ask", "deny", "", "x"])
#: Agents: with an agent file, without, suspicious names.
ASK_AGENTS = st.sampled_from(["Explore", "other", "", "unknown", "sub/x", "a\u200db"])


@st.composite
def hostile_layout(draw: st.DrawFn, root: Path) -> tuple[Layout, Path | None]:
    """Config files drawn from the strategies above (global, maybe project, agent file, `--rules`
    file) written under `root`: the layout and the rules file."""
    layout = Layout(root)
    layout.write_global(draw(CONFIG))
    project = draw(st.none() | CONFIG | st.just("{not json"))
    if project is not None:
        layout.write_project(project)
    agent = draw(AGENT_RULES)
    if agent:
        lines = "".join(f"  {s}:\n    '{p}': {a}\n" for s, p, a in agent)
        layout.write_agent("Explore", f"permission:\n{lines}")
    rules = draw(st.none() | st.fixed_dictionaries({"permission": PERMISSIONS}))
    return layout, None if rules is None else layout.write(root / "rules.json", rules)
