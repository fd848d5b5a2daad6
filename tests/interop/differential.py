"""A seeded generator of configs and facts for the differential test against the reference.

`generate(seed, count)` is reproducible: the same seed and count give the same cases. Each case has
up to four layers (global and project config.json, global and project agent files), tricky
patterns (wildcards, `?`, the optional `" *"` tail, home forms, regex metacharacters) and values
built from the patterns (exact fills and near misses), so that many rules match and the winning
rule is often not the first one tried. A case is tagged with each documented difference it may
exercise (`docs/design/fidelity.md`); untagged cases must agree with the reference exactly.
"""

from __future__ import annotations

import json
import random

from tests.interop.reference import GLOBAL, HOME, PROJECT, Case, agent_file

BASH_PATTERNS = ("*", "git *", "git push *", "git status", "rm *", "rm -rf *", "npm *", "ls*", "# *",
                 "? *", "*a*b", "echo ?", "git", "*;*", "sudo *", "* *", "git push --force *",
                 "(x)+[y] *", "$x *", "a.c", "*\n*", "^git|rm {2} \\d*")
PATH_PATTERNS = ("*", "*.env", "*.env.*", "*.env.example", "src/*", "/repo/*", "/repo/src/*",
                 "~/.ssh/*", "~//.ssh/*", "~\\/.ssh/*", "$HOME/*", "$HOME/build\\", "~", "$HOME",
                 "~/", f"{HOME}/*", f"{HOME}/notes.md", "*/secrets/*.pem", "~/../*", "~/./x/*",
                 "/.ssh/*", "a?c", "**", "$HOME//x", "~/x/../.ssh/*", "~user/*", "/repo/?/*")
SKILL_PATTERNS = ("*", "librarian", "lib*", "a?c", "danger-*", "danger")
MCP_PATTERNS = ("*", "mcp", "exa:*", "exa_search", "mcp_status", "server:tool", "exa")
TOOL_PATTERNS = ("*", "x", "?")
PATTERNS = {"bash": BASH_PATTERNS, "skill": SKILL_PATTERNS, "mcp": MCP_PATTERNS}
PATH_ASK_SURFACES = ("read", "write", "edit", "grep", "find", "ls", "path", "external_directory")
ASK_SURFACES = ("bash", "bash", "bash", *PATH_ASK_SURFACES, "skill", "mcp", "task")
# Surfaces a hostile or buggy child may pad: pi trims a tool call's name.
PADDED_SURFACES = ("bash ", " skill", "mcp ", " read", "task\t")
# Agent names pi opens a file for although pi-authorizer never uses them as file names.
ODD_AGENTS = ("a\u200db", "tab\tname", "sub/x", " ", "a\u202eb", "unknown")
# Surface keys that are wildcards themselves; pi matches them against the asked surface as is.
WILDCARD_SURFACE_KEYS = ("b*", "ba?h", "*", "re*d", "sk*", "*_directory", "pa*", "p?th", "*_*")
ACTIONS = ("allow", "deny", "ask")
SPECIAL_BASH_VALUES = (" rm -rf /", "# clean up\nrm -rf build", "  # only\n", "git  status", "git",
                       "\tgit push origin", "git push\n", "rm -rf", "\u00a0rm x", "\ufeffgit status",
                       "echo a\n# tail", "ls -la", "sudo rm -rf /", "git status --short", "",
                       "git status\r\n", "# a\r\nrm -rf x", "\u2028rm -rf /", "\x1crm -rf /",
                       "\u200brm -rf /", "cat <<EOF\nrm -rf /\nEOF", "cd x && rm -rf /", "git\npush",
                       "  \t# one\n   # two\n\u3000git push --force y")
SPECIAL_PATH_VALUES = ("~/notes.md", f"{HOME}/.ssh/id_rsa", "/.ssh/id_rsa", f"{HOME}/build\\",
                       f"{HOME}/notes.md", "/home/.ssh/id_rsa", ".env", "src/.env", ".env.example",
                       "/repo/src/a.ts", "src/a.ts", f"{HOME}", f"{HOME}/", "/secrets/" * 3 + "k.pem",
                       "~/.ssh/config", "abc", "/repo/a/x", f"{HOME}//.ssh/id_rsa", f"{HOME}/x/../.ssh/k",
                       "/repo/src/", "/repo/src//a.ts", "caf\u0065\u0301", "caf\u00e9", " /repo/x")
INTEGER_KEYS = ("42", "7", "0")
FRONTMATTER_QUIRKS = ("tab", "ragged", "open-space", "crlf", "empty-map", "long-reason", "comment",
                      "comment-opener", "malformed")


def _surface_patterns(surface: str) -> tuple[str, ...]:
    if surface in PATTERNS:
        return PATTERNS[surface]
    return PATH_PATTERNS if surface in PATH_ASK_SURFACES else TOOL_PATTERNS


def _fill(rng: random.Random, pattern: str) -> str:
    """A value the pattern may match: home forms expanded, wildcards filled, maybe one slip."""
    for word in ("${HOME}", "$HOME", "~"):
        if pattern.startswith(word) and rng.random() < 0.8:
            pattern = HOME + pattern[len(word):]
            break
    out = []
    for char in pattern:
        if char == "*":
            out.append(rng.choice(["", "x", "a/b", " push", "/.ssh/k", " --force y", "\n"]))
        elif char == "?":
            out.append(rng.choice(["a", "/", " ", "\U0001f600" if rng.random() < 0.1 else "b"]))
        else:
            out.append(char)
    value = "".join(out)
    if value and rng.random() < 0.25:
        index = rng.randrange(len(value))
        value = value[:index] + rng.choice(["", "x", " ", "/"]) + value[index + 1:]
    return value


def _pattern_map(rng: random.Random, surface: str, tags: set[str]) -> dict[str, object]:
    pool = _surface_patterns(surface)
    patterns = rng.sample(pool, k=min(len(pool), rng.randint(1, 4)))
    if rng.random() < 0.04:
        patterns.append(rng.choice(INTEGER_KEYS))
        tags.add("integer-key")
    result: dict[str, object] = {}
    for pattern in patterns:
        action = rng.choice(ACTIONS)
        if action == "deny" and rng.random() < 0.2:
            result[pattern] = {"action": "deny", "reason": rng.choice(["no", "secrets stay put"])}
            if rng.random() < 0.2:
                result[pattern] = {"action": "deny"}
        else:
            result[pattern] = action
    return result


def _permission(rng: random.Random, ask_surface: str, tags: set[str]) -> dict[str, object]:
    surfaces = [ask_surface, *rng.sample(ASK_SURFACES, k=rng.randint(0, 2))]
    permission: dict[str, object] = {}
    if rng.random() < 0.2:
        permission["*"] = rng.choice(ACTIONS) if rng.random() < 0.9 else {"x": rng.choice(ACTIONS)}
    if rng.random() < 0.08:
        key = rng.choice(WILDCARD_SURFACE_KEYS)
        permission[key] = _pattern_map(rng, "path" if "_" in key or key.startswith("p") else "bash", tags)
        if key in ("*_*", "*_directory", "p?th"):  # meets a family name or its members, not both
            tags.add("wildcard-member")
    if rng.random() < 0.04:  # newer directional members: unknown surfaces to 20.7.3
        member = rng.choice(["path_read", "path_write", "external_directory_read",
                             "external_directory_write"])
        permission[member] = _pattern_map(rng, "path", tags) if rng.random() < 0.8 else rng.choice(ACTIONS)
        tags.add("directional")
    for surface in surfaces:
        if rng.random() < 0.2:
            permission[surface] = rng.choice(ACTIONS)
        else:
            permission[surface] = _pattern_map(rng, surface, tags)
    return permission


def _yaml_key(key: str, tags: set[str]) -> str:
    """The key as YAML; a `:` or an escape in it is read differently by pi (tagged)."""
    if ":" in key:
        tags.add("frontmatter-colon-key")
    if "\\" in key or "\n" in key:
        tags.add("frontmatter-escape")
    return key if key.replace("_", "").isalnum() else json.dumps(key)


def _frontmatter(rng: random.Random, permission: dict[str, object], tags: set[str]) -> str:
    """An agent file whose `permission:` block both readers parse alike, unless a quirk is drawn."""
    quirk = rng.choice(FRONTMATTER_QUIRKS) if rng.random() < 0.15 else None
    indent = "\t" if quirk == "tab" else "  "
    lines = ["name: helper", "description: generated",
             "permission:  # rules" if quirk == "comment-opener" else "permission:"]
    for surface, value in permission.items():
        if isinstance(value, str):
            comment = "  # set by hand" if quirk == "comment" else ""
            lines.append(f"{indent}{_yaml_key(surface, tags)}: {value}{comment}")
            continue
        lines.append(f"{indent}{_yaml_key(surface, tags)}:")
        assert isinstance(value, dict)
        for offset, (pattern, action) in enumerate(value.items()):
            inner = indent * 2 + (" " if quirk == "ragged" and offset % 2 else "")
            if isinstance(action, dict):
                lines.append(f"{inner}{_yaml_key(pattern, tags)}:")
                lines.append(f"{inner}{indent}action: deny")
                if "reason" in action:
                    lines.append(f"{inner}{indent}reason: {action['reason']}")
                continue
            lines.append(f"{inner}{_yaml_key(pattern, tags)}: {action}")
    if quirk == "empty-map":
        lines.append(f"{indent}write:")
    if quirk == "malformed":  # pi drops the entry; pi-authorizer rejects the file (fails closed)
        lines.append(f"{indent}bash:")
        lines.append(f"{indent * 2}\"rm *\":")
        lines.append(f"{indent * 3}action: deny")
        lines.append(f"{indent * 3}reason:")
    if quirk == "long-reason":
        lines.append(f"{indent}bash:")
        lines.append(f"{indent * 2}\"rm *\":")
        lines.append(f"{indent * 3}action: deny")
        lines.append(f"{indent * 3}reason: {'x' * 501}")
    opening = "--- " if quirk == "open-space" else "---"
    text = "\n".join([opening, *lines, "---", "# Agent", ""])
    if quirk == "crlf":
        text = text.replace("\n", "\r\n")
    if quirk:
        tags.add({"comment-opener": "frontmatter-comment"}.get(quirk, f"frontmatter-{quirk}"))
    return text


def _values(rng: random.Random, surface: str, files: dict[str, str]) -> tuple[str, ...]:
    pool = _surface_patterns(surface)
    if surface == "bash":
        if rng.random() < 0.02:
            return ()
        if rng.random() < 0.3:
            return (rng.choice(SPECIAL_BASH_VALUES),)
        return (_fill(rng, rng.choice(pool)),)
    if surface in ("skill", "task"):
        return (_fill(rng, rng.choice(pool)),) if rng.random() < 0.9 else ()
    count = rng.randint(1, 3)
    values = []
    for _ in range(count):
        if rng.random() < 0.3:
            values.append(rng.choice(SPECIAL_PATH_VALUES if surface != "mcp" else MCP_PATTERNS))
        else:
            values.append(_fill(rng, rng.choice(pool)))
    return tuple(values)


def generate_case(rng: random.Random) -> tuple[Case, frozenset[str]]:
    """One case and the documented differences it may exercise."""
    tags: set[str] = set()
    surface = rng.choice(ASK_SURFACES)
    if rng.random() < 0.03:
        surface = rng.choice(PADDED_SURFACES)
        tags.add("padded-surface")
    agent = rng.choice(["unknown", "Unknown"]) if rng.random() < 0.03 else rng.choice(["Explore", "builder"])
    if rng.random() < 0.04:
        agent = rng.choice(ODD_AGENTS)
    files: dict[str, str] = {GLOBAL: json.dumps({"permission": _permission(rng, surface, tags)})}
    if rng.random() < 0.1:  # JSONC: comments outside strings, `//` inside one
        files[GLOBAL] = "// global\n/* rules */" + files[GLOBAL].replace(", ", ", // x\n", 1)
    if rng.random() < 0.5:
        files[PROJECT] = json.dumps({"permission": _permission(rng, surface, tags)})
    if rng.random() < 0.35:
        files[agent_file(agent)] = _frontmatter(rng, _permission(rng, surface, tags), tags)
    if rng.random() < 0.2:
        files[agent_file(agent, project=True)] = _frontmatter(rng, _permission(rng, surface, tags), tags)
    values = _values(rng, surface, files)
    surface, values = _reader_edges(rng, files, agent, surface, values, tags)
    if agent.lower() == "unknown" and any(name.endswith(f"/{agent}.md") for name in files):
        tags.add("agent-unknown")
    if agent in ODD_AGENTS and any(name.endswith(f"/{agent}.md") for name in files):
        tags.add("agent-odd")
    if surface not in PATH_ASK_SURFACES and surface not in ("bash", "skill", "mcp") and values:
        tags.add("tool-values")
    if any(ord(char) > 0xFFFF for value in values for char in value):
        tags.add("non-bmp")
    return Case(files, agent, surface, values), frozenset(tags)


# Classes found by the value-first campaign (`scripts/fidelity_unseen.py`). A lone surrogate is
# written with `surrogatepass`: bytes that are not UTF-8 (pi reads them as U+FFFD).
NOT_UTF8 = "\udcff"
OPENING = '{"permission": {'


def _reader_edges(
    rng: random.Random, files: dict[str, str], agent: str, surface: str, values: tuple[str, ...],
    tags: set[str],
) -> tuple[str, tuple[str, ...]]:
    """Now and then one edge of how pi READS the files and surface keys; the ask may change."""
    roll = rng.random()
    if roll < 0.02:  # a knob beyond 2**53 - 1: pi's schema drops the whole file
        name = rng.choice([GLOBAL, PROJECT])
        if name in files:
            knob = '{"toolInputPreviewMaxLength": 1e+20, '
            files[name] = files[name].replace(OPENING, knob + OPENING[1:], 1)
            if name == PROJECT:
                tags.add("rejected-file")  # here it fails closed; pi just drops it
    elif roll < 0.04:  # bytes that are not UTF-8: refused here (a config error), U+FFFD to pi
        name = rng.choice(sorted(files))
        if name.endswith(".md"):
            files[name] = files[name].replace("description: gen", f"description: gen{NOT_UTF8}", 1)
        else:
            files[name] = files[name].replace(OPENING, f'{{"$schema": "x{NOT_UTF8}", ' + OPENING[1:], 1)
        tags.add("bad-utf8")
    elif roll < 0.055:  # a `__proto__` surface or pattern: assigned, never an entry, to pi
        name = rng.choice(sorted(files))
        action = rng.choice(ACTIONS)
        if name.endswith(".md"):
            files[name] = files[name].replace("permission:\n", f"permission:\n  __proto__: {action}\n"
                                              if rng.random() < 0.5 else
                                              f"permission:\n  {surface.strip() or 'bash'}:\n"
                                              f"    __proto__: {action}\n", 1)
        else:
            value = f'"{action}"' if rng.random() < 0.8 else "5"  # pi's schema skips it unchecked
            inner = f'"__proto__": {value}, ' if rng.random() < 0.5 else \
                f'"{surface.strip()}": {{"__proto__": {value}}}, '
            files[name] = files[name].replace(OPENING, OPENING + inner, 1)
        values = ("__proto__",) if rng.random() < 0.6 else values
        tags.add("proto-key")
    elif roll < 0.065 and agent_file(agent) not in files:  # permission found through a root `__proto__`
        files[agent_file(agent)] = (f"---\n__proto__:\n  permission:\n    {json.dumps(surface)}: "
                                    f"{rng.choice(ACTIONS)}\n---\n")
        tags.add("frontmatter-proto")
    elif roll < 0.075:  # a surface key in a home form, or `?` against a surface beyond the BMP
        key, surface = rng.choice([("~", HOME), ("$HOME", HOME), ("$HOME/x", f"{HOME}/x"),
                                   ("~", "~"), ("?", "\U0001f600"), ("??", "\U0001f600")])
        files[GLOBAL] = files[GLOBAL].replace(OPENING, OPENING + f'"{key}": "{rng.choice(ACTIONS)}", ', 1)
        tags.add("non-bmp" if key.startswith("?") else "surface-home")
    return surface, values


def generate(seed: int, count: int) -> list[tuple[Case, frozenset[str]]]:
    """`count` cases from `seed` (reproducible)."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible test stream, not a secret
    return [generate_case(rng) for _ in range(count)]
