"""An independent differential campaign: pi-authorizer against the real pi 20.7.3 `PermissionManager`.

Not the suite's generator (`tests/interop/differential.py`): this one builds its cases from its
own grammar (pattern parts composed per surface, values instantiated from the patterns and then
bent: whitespace of every kind, comment lines, CRLF, heredocs, `&&` chains, NFC/NFD, astral
characters and combining marks, home forms, `//`, `..`, trailing separators), writes them where
pi reads them (global and project `config.json`, global and project `agents/<name>.md`), renders
agent frontmatter in many hand-written shapes (tabs, ragged indentation, `--- `, CRLF, empty
maps, long reasons, trailing comments, quoted keys, BOMs), and asks on every surface pi knows,
with and without facts.

Each case is judged by the real reference (one `node` process per batch, `tests/interop/node/
judge.ts`, the `check()` call pi's forwarded-request server makes) and by pi-authorizer the way
`pi-authorizer explain --json` does it (the request file read by the wire layer, then
`core.rules.explain.explain`). Verdict and winning rule (pattern and origin) are compared; every
disagreement is classified: looser than pi (a bug), stricter without a documented reason, or
stricter and documented (the explanation carries pi's reading, `docs/design/fidelity.md`).

    uv run python scripts/fidelity_campaign.py --cases 40000 --seed 7

prints agreement per category and the first disagreements of each class with a reproduction.
The node batch of one slice runs while Python judges the slice before it (2 processes at most).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from core.rules import PolicyStore  # noqa: E402
from core.rules.explain import explain  # noqa: E402
from core.wire.reader import RequestRejected, parse_request  # noqa: E402

NODE_DIR = REPO / "tests" / "interop" / "node"
HOME = "/home/tester"
GLOBAL_CONFIG = "agentdir/extensions/pi-permission-system/config.json"
PROJECT_CONFIG = "proj/.pi/extensions/pi-permission-system/config.json"
PATH_SURFACES = ("read", "write", "edit", "grep", "find", "ls", "path", "external_directory")
RANK = {"deny": 0, "ask": 1, "allow": 2}
STATES = ("allow", "ask", "deny")

# --------------------------------------------------------------------------------------------
# Grammar pieces (deliberately unlike the suite's generator)

COMMAND_WORDS = ("git", "rm", "npm", "curl", "cat", "echo", "make", "docker", "python3", "ls", "sudo",
                 "kubectl", "é", "日本", "e\u0301cho", "🚀run")
SUBWORDS = ("status", "push", "-rf", "--force", "install", "run dev", "origin main", "/", "$(id)", "x;y",
            "a|b", "'q'", '"dq"', "\\n")
PATH_HEADS = ("/srv/app", "/etc", "/", "~", "~/", "$HOME", "$HOME/", "${HOME}/", "${HOME}", "~\\",
              "$HOME\\", "~user/", HOME, HOME + "/", "./", "../", "", "C:\\Users\\x", "/srv//app")
PATH_PARTS = ("src", ".ssh", "..", ".", "", "secrets", "日本", "e\u0301", "\u00e9", "😀", "a?c", "*", "**",
              "node_modules", ".env", "id_rsa", "x y", "[ab]", "{a,b}", "(x)", "a+b", "$x", "%41", "\\*")
PATH_TAILS = ("", "/", "\\", "/*", "*", "*.pem", ".env*", "/**", "//", "/.", "/..", " *", "?")
MCP_PATTERNS = ("*", "mcp", "srv", "srv:*", "srv:tool", "srv_tool", "srv_*", "mcp_status", "mcp_*",
                "*:tool", "s?v:*", "mcp_list", "other", "srv:t?ol", "😀:*")
SKILL_PATTERNS = ("*", "lint", "lint*", "l?nt", "deploy-*", "ŝkill", "*-prod", "deploy-prod", "", "?")
TOOL_PATTERNS = ("*", "?", "x*", "", "**", "* *")
INTEGER_KEYS = ("0", "1", "7", "10", "007", "-1", "1e3", "4294967294", "4294967295", "42", "2.5")
# Whitespace of both worlds: JS trim strips the first group, Python's `str.strip` strips \x1c-\x1f
# and \x85 too but not \ufeff; U+200B and U+180E are whitespace to neither (modern JS).
PADDING = (" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\ufeff", "\u2028", "\u3000", "\x1c", "\x85",
           "\u200b", "\u180e", "\v", "\f", "\u202f")
EXTENSION_TOOLS = ("task", "webfetch", "todo_write", "Task", "mcp_call", "ünïcode_tool", "path_read",
                   "external_directory_write", "bash ", "*", "skills", "tools")
AGENT_NAMES = ("Explore", "builder", "reviewer", "unknown", "UNKNOWN", "Unknown ", "ünï", "e\u0301",
               "\u00e9", "a\u200db", "😀bot", "tab\tname", "a.b", "-x", "123", "con", "sub/x", " ",
               "a\u202eb", "ℌ", "a" * 200)
ASK_SURFACES = (("bash", 5), ("read", 2), ("write", 1), ("edit", 1), ("grep", 1), ("find", 1),
                ("ls", 1), ("path", 2), ("external_directory", 2), ("mcp", 2), ("skill", 2),
                ("extension", 2))


# Tags of the documented differences (docs/design/fidelity.md); a case with none of them is "plain".
QUIRKS = frozenset({"agent-name", "integer-key", "astral", "unknown-member", "directional", "newer-knob",
                    "tool-surface", "long-reason", "empty-map", "broken-json", "surface-wildcard",
                    "brace-home", "no-facts"})


def _weighted(rng: random.Random, pairs: tuple[tuple[str, int], ...]) -> str:
    return rng.choices([p for p, _ in pairs], weights=[w for _, w in pairs])[0]


@dataclass
class Case:
    """Files (case-relative path -> text) and one ask; `tags` name what the case exercises."""

    files: dict[str, str]
    agent: str
    surface: str
    values: list[str] | None  # None: the request carries no accessIntent (no facts)
    tags: set[str] = field(default_factory=set)
    raw_files: dict[str, bytes] = field(default_factory=dict)

    def write(self, root: Path) -> None:
        for relative, text in self.files.items():
            target = root / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(text.encode("utf-8", "surrogatepass"))
        for relative, data in self.raw_files.items():
            target = root / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        (root / "agentdir").mkdir(parents=True, exist_ok=True)
        (root / "proj").mkdir(parents=True, exist_ok=True)

    def reference_call(self, root: Path) -> dict[str, object]:
        """The `check()` input pi's server builds from these facts (docs/design/contract.md, facts and
        judgment)."""
        call: dict[str, object] = {"agentDir": str(root / "agentdir"), "cwd": str(root / "proj"),
                                   "agent": self.agent, "surface": self.surface}
        values = self.values or []
        if self.surface in PATH_SURFACES or self.surface == "mcp":
            call.update(kind="path-values", values=values)
        elif self.surface == "bash":
            call.update(kind="tool", input={"command": values[0] if values else ""})
        elif self.surface == "skill":
            call.update(kind="tool", input={"name": values[0] if values else ""})
        else:
            call.update(kind="tool", input={})
        return call

    def request(self) -> bytes:
        obj: dict[str, object] = {"id": "r1", "createdAt": 1, "requesterSessionId": "child",
                                  "targetSessionId": "parent", "requesterAgentName": self.agent,
                                  "surface": self.surface, "value": (self.values or [""])[0] or "x"}
        if self.values is not None:
            obj["accessIntent"] = {
                "surface": self.surface, "matchValues": self.values,
                "boundaryValue": self.values[0] if self.values else None,
                "requesterCwd": "/work", "principal": {"sessionId": "child", "agentName": self.agent},
            }
        return json.dumps(obj).encode("utf-8")

    def reproduction(self) -> str:
        values = None if self.values is None else [_short(v) for v in self.values]
        lines = [f"agent={self.agent!r} surface={self.surface!r} matchValues={values!r} "
                 f"tags={sorted(self.tags)}"]
        for relative, text in self.files.items():
            lines.append(f"  --- {relative}: {_short(text, 600)!r}")
        return "\n".join(lines)


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else f"{text[:limit]}...(+{len(text) - limit} chars)"


# --------------------------------------------------------------------------------------------
# Generator


class Generator:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)  # noqa: S311 - a reproducible campaign stream

    # -- patterns -------------------------------------------------------------------------------

    def bash_pattern(self, tags: set[str]) -> str:
        r = self.rng
        word = r.choice(COMMAND_WORDS)
        form = r.randrange(14)
        if form == 0:
            return "*"
        if form == 1:
            return word
        if form == 2:
            return f"{word} *"
        if form == 3:
            return f"{word}*"
        if form == 4:
            return f"{word} {r.choice(SUBWORDS)} *"
        if form == 5:
            return f"{word} {r.choice(SUBWORDS)}"
        if form == 6:
            return f"* {word} *"
        if form == 7:
            tags.add("matcher")
            return r.choice([f"{word} ?", f"{word}  *", f"{word}\t*", f" {word} *", f"{word} *\n",
                             f"{word} \\*", f"{word} *x", f"{word}?*", "* *", " *", "?", "**", f"# {word}",
                             f"{word} * *"])
        if form == 8:
            tags.add("matcher")
            return f"{word} " + "a" * r.randint(300, 3000) + "*"
        if form == 9:
            tags.add("unicode")
            return r.choice(["e\u0301cho *", "écho *", "echo ?", "echo 😀", "echo ??", "日本 *", "🚀run *"])
        if form == 10:
            tags.add("integer-key")
            return r.choice(INTEGER_KEYS)
        if form == 11:
            return ""
        if form == 12:
            return f"{word} *&&*"
        return f"*{r.choice(SUBWORDS)}*"

    def path_pattern(self, tags: set[str]) -> str:
        r = self.rng
        if r.random() < 0.05:
            tags.add("integer-key")
            return r.choice(INTEGER_KEYS)
        if r.random() < 0.03:
            tags.add("matcher")
            return "*" + "x/" * r.randint(200, 2000) + "*"
        head = r.choice(PATH_HEADS)
        if head.startswith(("~", "$HOME", "${HOME}")) or head.startswith(HOME):
            tags.add("home")
        parts = [r.choice(PATH_PARTS) for _ in range(r.randint(0, 3))]
        sep = "//" if r.random() < 0.1 else "/"
        body = sep.join(parts)
        tail = r.choice(PATH_TAILS)
        if any(p in ("..", ".", "") for p in parts) or "//" in head + body + tail:
            tags.add("dots")
        if any(ord(c) > 0x7F for c in body):
            tags.add("unicode")
        if head and not head.endswith(("/", "\\")) and body:
            head += "/"
        return head + body + tail

    def pattern(self, surface: str, tags: set[str]) -> str:
        r = self.rng
        if surface == "bash":
            return self.bash_pattern(tags)
        if surface in PATH_SURFACES or surface in ("path_read", "path_write", "external_directory_read",
                                                     "external_directory_write"):
            return self.path_pattern(tags)
        if surface == "mcp":
            return r.choice(MCP_PATTERNS)
        if surface == "skill":
            return r.choice(SKILL_PATTERNS)
        return r.choice(TOOL_PATTERNS)

    def action(self, tags: set[str]) -> object:
        r = self.rng
        state = r.choice(STATES)
        if state == "deny" and r.random() < 0.25:
            reason = r.choice(["no", "keys stay: here", "x" * r.randint(400, 700), "# not a comment",
                               "tab\there", "ünï 😀", ""])
            if len(reason) > 500:
                tags.add("long-reason")
            return {"action": "deny", "reason": reason} if r.random() < 0.85 else {"action": "deny"}
        return state

    def pattern_map(self, surface: str, tags: set[str]) -> dict[str, object]:
        return {self.pattern(surface, tags): self.action(tags) for _ in range(self.rng.randint(1, 5))}

    # -- a permission block ---------------------------------------------------------------------

    def permission(self, ask_surface: str, tags: set[str], *, frontmatter: bool) -> dict[str, object]:
        r = self.rng
        surfaces = [ask_surface] + [_weighted(r, ASK_SURFACES) for _ in range(r.randint(0, 2))]
        surfaces = [s if s != "extension" else r.choice(EXTENSION_TOOLS).strip() for s in surfaces]
        block: dict[str, object] = {}
        if r.random() < 0.25:
            block["*"] = r.choice(STATES)
            tags.add("universal")
        for surface in surfaces:
            if r.random() < 0.05:  # surface keys that are wildcards themselves
                tags.add("surface-wildcard")
                surface = r.choice(["*", "b*", "?ash", "re*", "*_directory", "path*", "mc?", "sk*ll", "~"])
            if r.random() < 0.25:
                block[surface] = r.choice(STATES)
            else:
                block[surface] = self.pattern_map(surface, tags)
        if r.random() < 0.06:
            member = r.choice(["path_read", "path_write", "external_directory_read",
                               "external_directory_write", "path_reed", "external_directory_x"])
            tags.add("directional" if member in ("path_read", "path_write", "external_directory_read",
                                                 "external_directory_write") else "unknown-member")
            block[member] = self.pattern_map("path", tags) if r.random() < 0.7 else r.choice(STATES)
        if frontmatter and r.random() < 0.1:
            tags.add("empty-map")
            block[r.choice(["write", "bash", ask_surface])] = {}
        return block

    # -- files ----------------------------------------------------------------------------------

    def config_json(self, permission: dict[str, object], tags: set[str]) -> str:
        r = self.rng
        document: dict[str, object] = {}
        if r.random() < 0.1:
            document["$schema"] = "https://example.invalid/schema.json"
        if r.random() < 0.05:
            knob = r.choice([("debugLog", True), ("permissionReviewLog", False), ("yoloMode", False),
                             ("toolInputPreviewMaxLength", 50), ("forwardingTimeoutMs", 1000),
                             ("permisson", {}), ("piInfrastructureReadPaths", ["/x"])])
            document[knob[0]] = knob[1]
            if knob[0] in ("forwardingTimeoutMs",):
                tags.add("newer-knob")
            if knob[0] == "permisson":
                tags.add("unknown-key")
        document["permission"] = permission
        text = json.dumps(document, indent=r.choice([None, 2, "\t"]), ensure_ascii=r.random() < 0.5)
        if r.random() < 0.12:
            tags.add("jsonc")
            text = "// pi config\n" + text.replace("{", "{ /* c */", 1)
            if '"permission"' in text:
                text = text.replace('"permission"', '"permission" // rules\n', 1)
        if r.random() < 0.02:
            tags.add("broken-json")
            text = text.rstrip()[:-1] if r.random() < 0.5 else "\ufeff" + text
        return text

    def frontmatter(self, permission: dict[str, object], tags: set[str]) -> str:
        r = self.rng
        unit = r.choice(["  ", "  ", "    ", "\t", " "])
        ragged = r.random() < 0.1
        quote_all = r.random() < 0.2
        comment_values = r.random() < 0.08
        if unit == "\t":
            tags.add("fm-tab")
        if ragged:
            tags.add("fm-ragged")
        if comment_values:
            tags.add("fm-comment")

        def key(text: str) -> str:
            plain = text and all(c.isalnum() or c in "_-./~$" for c in text) and not text.isdigit()
            if plain and not quote_all:
                return text
            if ":" in text or "#" in text or "\\" in text or '"' in text or "'" in text:
                tags.add("fm-quoting")
            if r.random() < 0.3 and "'" not in text:
                return f"'{text}'"
            return json.dumps(text, ensure_ascii=False)

        def scalar(text: str) -> str:
            rendered = r.choice([text, text, f'"{text}"', f"'{text}'"])
            return rendered + ("  # by hand" if comment_values else "")

        lines = []
        if r.random() < 0.7:
            lines += ["name: agent", "description: \"does things: well\""]
        if r.random() < 0.15:
            lines += ["tools:", "  - read", "  - bash"]
            tags.add("fm-list")
        if r.random() < 0.1:
            lines.append("# a comment line")
        lines.append(r.choice(["permission:", "permission:", "\"permission\":", "permission:  # rules"]))
        for surface, value in permission.items():
            depth1 = unit + (" " if ragged and r.random() < 0.5 else "")
            if isinstance(value, str):
                lines.append(f"{depth1}{key(surface)}: {scalar(value)}")
                continue
            lines.append(f"{depth1}{key(surface)}:")
            assert isinstance(value, dict)
            for pattern, action in value.items():
                depth2 = depth1 + unit + (" " if ragged and r.random() < 0.5 else "")
                if isinstance(action, dict):
                    lines.append(f"{depth2}{key(pattern)}:")
                    lines.append(f"{depth2}{unit}action: deny")
                    if "reason" in action:
                        lines.append(f"{depth2}{unit}reason: {action['reason']}")
                else:
                    lines.append(f"{depth2}{key(pattern)}: {scalar(str(action))}")
        if r.random() < 0.2:
            lines.append("model: fast")
        opening = r.choices(["---", "--- ", "---\t", "----"], weights=[90, 4, 3, 3])[0]
        closing = r.choices(["---", "--- ", "---x", "..."], weights=[92, 3, 3, 2])[0]
        if opening != "---" or closing != "---":
            tags.add("fm-fence")
        text = "\n".join([opening, *lines, closing, "", "# Agent", "body text", ""])
        if r.random() < 0.08:
            tags.add("fm-crlf")
            text = text.replace("\n", "\r\n")
        if r.random() < 0.02:
            tags.add("fm-bom")
            text = "\ufeff" + text
        return text

    # -- values ---------------------------------------------------------------------------------

    def instantiate(self, pattern: str) -> str:
        r = self.rng
        for word in ("${HOME}", "$HOME", "~"):
            if pattern.startswith(word) and r.random() < 0.75:
                pattern = HOME + pattern[len(word):]
                break
        out = []
        for char in pattern:
            if char == "*":
                out.append(r.choice(["", "a", "x/y", " --force", "\n", "é", "😀", "..", "/", "k.pem"]))
            elif char == "?":
                out.append(r.choice(["q", "/", " ", "😀", "e\u0301", "\u0301", "日"]))
            else:
                out.append(char)
        return "".join(out)

    def bend(self, value: str, tags: set[str]) -> str:
        r = self.rng
        move = r.randrange(12)
        if move == 0 and value:
            i = r.randrange(len(value))
            return value[:i] + value[i + 1:]
        if move == 1:
            i = r.randrange(len(value) + 1)
            return value[:i] + r.choice(["x", "/", " ", "*", "?", "\\"]) + value[i:]
        if move == 2:
            tags.add("unicode")
            return unicodedata.normalize(r.choice(["NFC", "NFD"]), value)
        if move == 3:
            return value + r.choice(["/", "\\", "//", "/.", "/.."])
        if move == 4:
            return value.replace("/", "//", 1)
        if move == 5:
            return value.upper()
        return value

    def bash_value(self, pool: list[str], tags: set[str]) -> str:
        r = self.rng
        base = self.instantiate(r.choice(pool)) if pool and r.random() < 0.8 else r.choice(
            ["git status", "rm -rf /", "npm install", "ls", "", "echo hi"])
        move = r.randrange(16)
        if move < 5:
            return base
        tags.add("bash-shape")
        if move == 5:
            return r.choice(PADDING) + base + r.choice(PADDING)
        if move == 6:
            return f"# {r.choice(['why', 'rm -rf /', ''])}\n{base}"
        if move == 7:
            return f"{base}\n# trailing"
        if move == 8:
            return base.replace(" ", "\r\n", 1) if " " in base else base + "\r\n"
        if move == 9:
            return f"cat <<EOF\n{base}\nEOF"
        if move == 10:
            return f"{base} && {r.choice(['rm -rf /', 'git push', 'echo ok'])}"
        if move == 11:
            return f"  \t# c1\n   # c2\n{r.choice(PADDING)}{base}"
        if move == 12:
            return f"{base}\n{r.choice(['git status', 'rm x'])}"
        if move == 13:
            return "\n".join(["# only", "  # comments"])
        if move == 14:
            return r.choice(["\u2028", "\ufeff", "\u00a0", "\x1c", "\u200b"]) + base
        return base + " # inline"

    def values(self, surface: str, pool: list[str], tags: set[str]) -> list[str] | None:
        r = self.rng
        if r.random() < 0.03:
            tags.add("no-facts")
            return None
        if r.random() < 0.04:
            tags.add("empty-values")
            return []
        if surface == "bash":
            return [self.bash_value(pool, tags)]
        if surface == "skill":
            return [self.bend(self.instantiate(r.choice(pool)), tags) if pool else "lint"]
        count = 1 if surface not in PATH_SURFACES and surface != "mcp" else r.randint(1, 3)
        out = []
        for _ in range(count):
            if pool and r.random() < 0.75:
                value = self.bend(self.instantiate(r.choice(pool)), tags)
            else:
                value = r.choice(["~/notes.md", f"{HOME}/.ssh/id_rsa", "/srv/app/src/a.ts", "src/a.ts",
                                  ".env", "srv:tool", "mcp", "", " ", "*", "/", HOME, f"{HOME}/"])
            if r.random() < 0.05:
                tags.add("padding")
                value = r.choice(PADDING) + value
            if r.random() < 0.02:
                tags.add("long-value")
                value = value + "y" * r.randint(1000, 20000)
            out.append(value)
        return out

    # -- a case ---------------------------------------------------------------------------------

    def case(self) -> Case:
        r = self.rng
        tags: set[str] = set()
        kind = _weighted(r, ASK_SURFACES)
        surface = kind if kind != "extension" else r.choice(EXTENSION_TOOLS)
        if kind == "extension":
            tags.add("tool-surface")
        agent = r.choice(AGENT_NAMES) if r.random() < 0.25 else r.choice(["Explore", "builder"])
        if agent not in ("Explore", "builder"):
            tags.add("agent-name")
        files: dict[str, str] = {}
        layers = r.choice([("g",), ("g", "p"), ("g", "a"), ("g", "p", "a", "pa"), ("p", "pa"), ("a",),
                           ("g", "pa"), ("pa",), ("g", "p", "a")])
        for layer in layers:
            fm = layer in ("a", "pa")
            block = self.permission(surface, tags, frontmatter=fm)
            if fm:
                if not _file_name_ok(agent):
                    continue
                where = "agentdir/agents" if layer == "a" else "proj/.pi/agents"
                files[f"{where}/{agent}.md"] = self.frontmatter(block, tags)
                tags.add("frontmatter")
            else:
                target = GLOBAL_CONFIG if layer == "g" else PROJECT_CONFIG
                files[target] = self.config_json(block, tags)
        if len(layers) > 2:
            tags.add("layers")
        pool = [p for text in files.values() for p in _patterns_in(text, surface)]
        values = self.values(surface, pool, tags)
        if values and any(ord(c) > 0xFFFF for v in values for c in v):
            tags.add("astral")
        if surface == "mcp":
            tags.add("mcp")
        if surface == "skill":
            tags.add("skill")
        if surface in PATH_SURFACES:
            tags.add("path-surface")
        if surface == "bash":
            tags.add("bash")
        if any("${HOME}" in text for text in files.values()):
            tags.add("brace-home")
        if not tags & QUIRKS and not any(tag.startswith("fm-") for tag in tags):
            tags.add("plain")  # nothing a documented difference is about
        return Case(files, agent, surface, values, tags)


def _file_name_ok(name: str) -> bool:
    return bool(name) and "\x00" not in name and name not in (".", "..") and not name.startswith("../")


def _patterns_in(text: str, surface: str) -> list[str]:
    """Patterns of `surface` in a generated file (JSON only; frontmatter rendered from the same pools)."""
    try:
        document = json.loads(text)
    except ValueError:
        return []
    value = document.get("permission", {}).get(surface) if isinstance(document, dict) else None
    return [p for p in value if isinstance(p, str)] if isinstance(value, dict) else []


# --------------------------------------------------------------------------------------------
# Judging


@dataclass(frozen=True)
class Verdict:
    state: str
    pattern: str | None
    origin: str | None


def ours(case: Case, root: Path) -> tuple[Verdict, bool]:
    """pi-authorizer's verdict as `explain --json` computes it, and whether pi's reading was consulted."""
    try:
        parsed = parse_request(case.request())
    except RequestRejected as exc:
        raise AssertionError(f"campaign wrote an unusable request: {exc.reason}") from exc
    store = PolicyStore(root / "agentdir", root / "proj", home=HOME)
    result = explain(store, parsed.facts, parsed.agent_name)
    outcome = result.resolution.outcome
    decided = result.decided_by
    if outcome is None:
        return Verdict(result.verdict, None, None), False
    verdict = Verdict(result.verdict, outcome.matched_pattern, outcome.origin)
    if decided is not None and decided.get("kind") == "rule":
        assert (decided["pattern"], decided["origin"]) == (verdict.pattern, verdict.origin), decided
    documented = any(step.get("step") == "pi-reading" for step in result.trail)
    return verdict, documented


def start_reference(calls: list[dict[str, object]], node: str, folder: Path) -> subprocess.Popen[bytes]:
    """Start judge.ts on `calls`; its stdin, stdout and stderr are files, so nothing can fill a pipe."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "in.json").write_text(json.dumps(calls), encoding="utf-8")
    with (folder / "in.json").open("rb") as stdin, (folder / "out.json").open("wb") as out, \
            (folder / "err.txt").open("wb") as err:
        return subprocess.Popen(
            [node, str(NODE_DIR / "node_modules" / "tsx" / "dist" / "cli.mjs"), str(NODE_DIR / "judge.ts")],
            cwd=NODE_DIR, stdin=stdin, stdout=out, stderr=err,
            env={"HOME": HOME, "PATH": "/usr/bin:/bin:/usr/local/bin"}, start_new_session=True,
        )


class ReferenceTimeout(RuntimeError):
    """The reference took too long on a batch (its regexes backtrack on some long patterns)."""


def finish_reference(proc: subprocess.Popen[bytes], folder: Path, expected: int,
                     timeout_s: float = 300.0) -> list[Verdict]:
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise ReferenceTimeout(f"judge.ts took over {timeout_s:.0f} s") from exc
    if proc.returncode != 0:
        raise RuntimeError(f"judge.ts failed:\n{(folder / 'err.txt').read_text()[-2000:]}")
    out = (folder / "out.json").read_text(encoding="utf-8")
    rows = json.loads([line for line in out.splitlines() if line.strip()][-1])
    if len(rows) != expected:
        raise RuntimeError(f"judge.ts answered {len(rows)} of {expected} cases")
    verdicts = []
    for row in rows:
        if "error" in row:
            raise RuntimeError(f"reference error: {row['error']}")
        verdicts.append(Verdict(row["state"], row["matchedPattern"], row["origin"]))
    return verdicts


# Documented in docs/design/fidelity.md without a pi-reading step in the explanation: asks on a
# directional surface (newer children only) follow the newer semantics; newer config knobs are
# accepted where 20.7.3 rejects the whole file.
DIRECTIONAL_ASKS = frozenset({"path_read", "path_write", "external_directory_read",
                              "external_directory_write"})


def classify(case: Case, mine: Verdict, theirs: Verdict, documented: bool) -> str:
    if mine == theirs:
        return "identical"
    deliberate = case.surface in DIRECTIONAL_ASKS or "newer-knob" in case.tags
    if mine.state == theirs.state:
        return "same-verdict-other-rule"
    if RANK[mine.state] > RANK[theirs.state]:
        return "looser-documented" if deliberate else "looser"
    return "stricter-documented" if documented or deliberate else "stricter-undocumented"


# --------------------------------------------------------------------------------------------


def run(cases_total: int, seed: int, batch: int, show: int, counts_file: Path | None,
        dump_file: Path | None = None) -> int:
    node = shutil.which("node")
    if node is None:
        print("node is not installed", file=sys.stderr)
        return 2
    gen = Generator(seed)
    work = Path(tempfile.mkdtemp(prefix="fidelity-campaign-"))
    started = time.monotonic()
    by_class: Counter[str] = Counter()
    by_tag: dict[str, Counter[str]] = defaultdict(Counter)
    examples: dict[str, list[str]] = defaultdict(list)
    pending: tuple[list[Case], list[Path], subprocess.Popen[bytes] | None] | None = None
    done = 0
    dump = dump_file.open("w", encoding="utf-8") if dump_file is not None else None

    def settle(cases: list[Case], roots: list[Path], proc: subprocess.Popen[bytes] | None) -> None:
        judged = [ours(c, root) for c, root in zip(cases, roots, strict=True)]
        expected = sum(c.values is not None for c in cases)
        try:
            it = iter(finish_reference(proc, roots[0].parent / "node", expected) if proc is not None else [])
        except ReferenceTimeout:
            by_class["reference-timeout (batch skipped)"] += len(cases)
            shutil.rmtree(roots[0].parent, ignore_errors=True)
            return
        for case, root, (mine, documented) in zip(cases, roots, judged, strict=True):
            # No facts: pi's server prompts (ask, no rule); pi-authorizer must ask by no rule too.
            reference = Verdict("ask", None, None) if case.values is None else next(it)
            kind = classify(case, mine, reference, documented)
            by_class[kind] += 1
            for tag in case.tags | {"all"}:
                by_tag[tag][kind] += 1
            if kind != "identical" and dump is not None:
                dump.write(json.dumps({"class": kind, "files": case.files, "agent": case.agent,
                                       "surface": case.surface, "values": case.values,
                                       "tags": sorted(case.tags), "ours": mine.__dict__,
                                       "reference": reference.__dict__}) + "\n")
            if kind != "identical" and len(examples[kind]) < show:
                alone = reference
                if case.values is not None:
                    single = root.parent / "alone"
                    proc1 = start_reference([case.reference_call(root)], node, single)
                    alone = finish_reference(proc1, single, 1)[0]
                examples[kind].append(f"{case.reproduction()}\n  pi-authorizer: {mine}\n  reference:     "
                                      f"{reference}" + ("" if alone == reference else f" (alone: {alone})"))
        shutil.rmtree(roots[0].parent, ignore_errors=True)

    try:
        while done < cases_total:
            size = min(batch, cases_total - done)
            cases = [gen.case() for _ in range(size)]
            roots = [work / f"b{done}" / f"c{i}" for i in range(size)]
            for case, root in zip(cases, roots, strict=True):
                case.write(root)
            calls = [c.reference_call(root) for c, root in zip(cases, roots, strict=True)
                     if c.values is not None]
            proc = start_reference(calls, node, roots[0].parent / "node") if calls else None
            if pending is not None:
                settle(*pending)
            pending = (cases, roots, proc)
            done += size
        if pending is not None:
            settle(*pending)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    elapsed = time.monotonic() - started
    total = sum(by_class.values())
    print(f"fidelity campaign: seed {seed}, {total} cases in {elapsed:.0f} s")
    for kind, count in by_class.most_common():
        print(f"  {kind:24} {count:7}  {100 * count / total:6.2f}%")
    print("agreement by category (identical / cases; looser = pi-authorizer allows more than pi):")
    for tag in sorted(by_tag, key=lambda t: (t != "all", t)):
        counts = by_tag[tag]
        n = sum(counts.values())
        extra = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k != "identical")
        print(f"  {tag:22} {counts['identical']:6}/{n:<6} {100 * counts['identical'] / n:6.2f}%  {extra}")
    for kind, items in examples.items():
        print(f"\n=== {kind}: first {len(items)} ===")
        for item in items:
            print(item)
    if counts_file is not None:
        counts_file.write_text(json.dumps({"classes": by_class, "tags": by_tag}, indent=1))
    return 1 if by_class["looser"] or by_class["stricter-undocumented"] else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batch", type=int, default=2000, help="cases per node process")
    parser.add_argument("--show", type=int, default=8, help="reproductions printed per class")
    parser.add_argument("--json", type=Path, default=None, help="write the counts here")
    parser.add_argument("--dump", type=Path, default=None, help="write every disagreement here (JSON lines)")
    args = parser.parse_args()
    return run(args.cases, args.seed, args.batch, args.show, args.json, args.dump)


if __name__ == "__main__":
    sys.exit(main())
