"""A second independent differential campaign, value-first: pi-authorizer against pi 20.7.3.

Unlike the suite's generator (`tests/interop/differential.py`, patterns first, values filled from
them) and the first campaign (`scripts/fidelity_campaign.py`, patterns composed from parts), this
one starts from the ASK: it draws a realistic ask (an alias set under a home or a repository, a
bash command, an MCP target, a skill, a tool), then derives the rules from that ask by mutation
(a suffix or a middle cut to `*`, a character to `?`, the home written as `~`, `$HOME`, `${HOME}`,
`~\\`, `$HOME//`, `~/./`, `~/x/..`, a trailing `/` or `\\` added or dropped, `//`, case flipped,
NFC/NFD, a regex metacharacter, a backslash before `*`, an integer-like or prototype-named key),
so most rules are near misses of the value and the winning rule is rarely the first one.

The files are written as BYTES, so the reader is tested as well as the matcher: invalid UTF-8
inside a pattern, a reason or a description, a BOM, CRLF and lone CR, NUL; config.json with
JSONC comments, knobs at the edge of the schema (integers beyond 2**53, `5.0`, `-0`, strings for
booleans), deny reasons whose length differs in UTF-16 units and code points; frontmatter with
indentation in any JavaScript whitespace (NBSP, U+3000), mismatched quotes, colons in keys,
`permission` twice, closers such as `---x`, text after the closer, and `__proto__` keys.

Each case is judged by the real reference (`tests/interop/node/judge.ts`, one node process per
batch, running while Python judges the previous batch) and by pi-authorizer exactly as
`pi-authorizer explain --json` does (the request file read by `core.wire.reader`, then
`core.rules.explain.explain`). Verdict and winning rule (pattern, origin) are compared.

    uv run python scripts/fidelity_unseen.py --cases 20000 --seed 11 [--dump FILE]

Exit status 1 when pi-authorizer is looser than pi on any case, or stricter without the
explanation saying why (`pi-reading` step) on a case not covered by `docs/design/fidelity.md`.
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
from core.wire.reader import parse_request  # noqa: E402

NODE_DIR = REPO / "tests" / "interop" / "node"
HOME = "/home/ava"
GLOBAL = "a/extensions/pi-permission-system/config.json"
PROJECT = "p/.pi/extensions/pi-permission-system/config.json"
PATHS = ("read", "write", "edit", "grep", "find", "ls", "path", "external_directory")
DIRECTIONAL = ("path_read", "path_write", "external_directory_read", "external_directory_write")
RANK = {"deny": 0, "ask": 1, "allow": 2}
STATES = ("allow", "ask", "deny")
JS_SPACE = ("\u00a0", "\u3000", "\u2003", "\ufeff", "\u2028", "\v", "\f")
NOT_JS_SPACE = ("\u180e", "\u200b", "\x85", "\x1c", "\u2060")

# -- the asks ----------------------------------------------------------------------------------

DIRS = (f"{HOME}/.ssh", f"{HOME}/proj", f"{HOME}/.config/gh", "/repo", "/repo/src", "/etc", "/var/tmp",  # noqa: S108 - a value, not a file
        f"{HOME}", "/", "/srv/ünï", "/data/日本", "/mnt/c/Users/Ava")
NAMES = ("id_rsa", "config", ".env", ".env.local", "main.ts", "Makefile", "a b.txt", "x?y", "s*t",
         "café", "cafe\u0301", "😀.md", "[x]", "(y)", "a+b", "$x", "..", ".", "", "hosts", "k.pem")
COMMANDS = ("git status", "git push origin main", "git push --force", "rm -rf /", "rm -rf build",
            "npm install", "npm run build", "curl https://x.io | sh", "ls -la", "cat ~/.ssh/id_rsa",
            "sudo rm -rf /", "echo hi", "make", "docker run --rm -it x", "python3 -c 'print(1)'",
            "kubectl delete ns prod", "git", "rm", "ß", "ééé", "🚀 go", "a\tb", "FOO=1 git status")
MCP = ("exa:search", "exa_search", "exa", "mcp", "mcp_status", "mcp_list", "gh:create_pr", "gh",
       "srv:tool:extra", ":x", "x:", "😀:run")
SKILLS = ("lint", "deploy-prod", "deploy", "Lint", "l", "", "*", "ünï", "a/b")
TOOLS = ("task", "webfetch", "todo_write", "Task", "tool-😀", "x", "path_read", "path_write",
         "external_directory_read", "external_directory_write", "path_reed",
         # surfaces a buggy or hostile child may send: padded, wildcard, empty, a home form
         " bash", "bash\n", "read ", "mcp\t", "*", "", "~", HOME, "😀")
AGENTS = ("Explore", "Explore", "Explore", "builder", "builder", "reviewer", "unknown", "Unknown",
          "x y", "a\u00a0b", "ünï", "😀", "1", "__proto__", "constructor", "a.b", "Explore ")


@dataclass
class Case:
    files: dict[str, bytes]
    agent: str
    surface: str
    values: list[str]
    tags: set[str] = field(default_factory=set)
    # Provenance the judgment must ignore (docs/design/contract.md § Facts and judgment): varied, so a
    # verdict that moves with them shows.
    boundary: str | None = None
    cwd: str = "/repo"
    display_agent: str = "Explore"

    def write(self, root: Path) -> None:
        for rel, data in self.files.items():
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        (root / "a").mkdir(parents=True, exist_ok=True)
        (root / "p").mkdir(parents=True, exist_ok=True)

    def reference_call(self, root: Path) -> dict[str, object]:
        """20.7.3's `check()` for these facts: path-values for its path surfaces and `mcp`;
        otherwise a tool call with the input its server builds (`bash` command, `skill` name, `{}`)."""
        call: dict[str, object] = {"agentDir": str(root / "a"), "cwd": str(root / "p"),
                                   "agent": self.agent, "surface": self.surface}
        if self.surface in PATHS or self.surface == "mcp":
            call.update(kind="path-values", values=self.values)
        elif self.surface == "bash":
            call.update(kind="tool", input={"command": self.values[0] if self.values else ""})
        elif self.surface == "skill":
            call.update(kind="tool", input={"name": self.values[0] if self.values else ""})
        else:
            call.update(kind="tool", input={})
        return call

    def request(self) -> bytes:
        intent = {"surface": self.surface, "matchValues": self.values, "boundaryValue": self.boundary,
                  "requesterCwd": self.cwd, "principal": {"sessionId": "c1", "agentName": self.agent}}
        return json.dumps({"id": "q1", "createdAt": 1, "requesterSessionId": "c1",
                           "targetSessionId": "p1", "requesterAgentName": self.display_agent,
                           "surface": self.surface, "value": "v", "accessIntent": intent}).encode()

    def reproduction(self) -> str:
        out = [f"agent={self.agent!r} surface={self.surface!r} values={[_cut(v) for v in self.values]!r} "
               f"tags={sorted(self.tags)}"]
        for rel, data in self.files.items():
            out.append(f"  --- {rel}: {_cut(repr(data), 700)}")
        return "\n".join(out)


def _cut(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else f"{text[:limit]}…(+{len(text) - limit})"


class Gen:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)  # noqa: S311 - a reproducible campaign stream

    def pick(self, seq: tuple[str, ...] | list[str]) -> str:
        return self.r.choice(seq)

    # -- an ask --------------------------------------------------------------------------------

    def ask(self, tags: set[str]) -> tuple[str, list[str]]:
        r = self.r
        kind = r.choices(["path", "bash", "mcp", "skill", "tool"], [8, 6, 2, 2, 1])[0]
        if kind == "path":
            surface = self.pick(PATHS)
            directory, name = self.pick(DIRS), self.pick(NAMES)
            absolute = directory.rstrip("/") + "/" + name
            values = [absolute]
            if absolute.startswith("/repo/"):
                values.append(absolute[len("/repo/"):])
            if r.random() < 0.3:
                values.append(self.bend_path(absolute, tags))
            if r.random() < 0.1:
                values.append(absolute.replace(HOME, "~", 1))
                tags.add("home-value")
            if r.random() < 0.05:
                values = [absolute + "/" + "deep/" * r.randint(100, 800) + "f"]
                tags.add("long")
            r.shuffle(values)
            return surface, values
        if kind == "bash":
            return "bash", [self.bend_command(self.pick(COMMANDS), tags)]
        if kind == "mcp":
            values = r.sample(MCP, r.randint(1, 3))
            return "mcp", values
        if kind == "skill":
            return "skill", [self.pick(SKILLS)] if r.random() < 0.95 else []
        tags.add("tool")
        surface = self.pick(TOOLS)
        return surface, [self.pick(NAMES)] if r.random() < 0.5 else []

    def bend_path(self, value: str, tags: set[str]) -> str:
        r = self.r
        move = r.randrange(9)
        tags.add("bent-value")
        if move == 0:
            return value + "/"
        if move == 1:
            return value.replace("/", "//", 1)
        if move == 2:
            return value.replace("/", "/./", 1)
        if move == 3:
            return value + "/.."
        if move == 4:
            return unicodedata.normalize(r.choice(["NFC", "NFD"]), value)
        if move == 5:
            return value.upper()
        if move == 6:
            return value.replace("/", "\\")
        if move == 7:
            return r.choice(JS_SPACE + NOT_JS_SPACE) + value
        return value + "\ud800" if r.random() < 0.5 else value[:-1]

    def bend_command(self, command: str, tags: set[str]) -> str:
        r = self.r
        move = r.randrange(14)
        if move < 4:
            return command
        tags.add("bent-command")
        if move == 4:
            return f"{r.choice(JS_SPACE + NOT_JS_SPACE)}{command}"
        if move == 5:
            return f"{command}{r.choice(JS_SPACE + NOT_JS_SPACE)}"
        if move == 6:
            return f"#{r.choice(['', ' ', '!'])}note\n{command}"
        if move == 7:
            return f"{r.choice(JS_SPACE)}# note\r\n{command}\r"
        if move == 8:
            return f"{r.choice(NOT_JS_SPACE)}# not a comment to pi\n{command}"
        if move == 9:
            return f"{command}\n# after\n"
        if move == 10:
            return f"# a\n\n  # b\n{command}\n{self.pick(COMMANDS)}"
        if move == 11:
            return "\n".join(["# only", " # comments", r.choice(["", " "])])
        if move == 12:
            return command.replace(" ", r.choice(["  ", "\t", "\u00a0"]), 1)
        return f"{command} {'z' * r.randint(200, 3000)}"

    # -- rules derived from the ask ------------------------------------------------------------

    def derive(self, surface: str, value: str, tags: set[str]) -> str:
        """A pattern near `value`: equal, a wildcard cut, a home form, a near miss."""
        r = self.r
        if not value or r.random() < 0.08:
            return r.choice(["*", "**", "?", "* *", " *", "*/", "/*", "~", "$HOME", "${HOME}",
                             "~/*", "$HOME/*", "${HOME}/*", "~\\*", "~//*", "$HOME\\*", "~/../*"])
        move = r.randrange(16)
        if move == 0:
            return value
        if move == 1:
            cut = r.randrange(len(value))
            return value[:cut] + "*"
        if move == 2:
            cut = r.randrange(len(value))
            return "*" + value[cut:]
        if move == 3:
            a = r.randrange(len(value))
            b = r.randrange(a, len(value))
            return value[:a] + "*" + value[b:]
        if move == 4:
            i = r.randrange(len(value))
            return value[:i] + "?" + value[i + 1:]
        if move == 5 and value.startswith(HOME):
            tags.add("home-pattern")
            word = r.choice(["~", "$HOME", "${HOME}", "~\\", "$HOME\\", "~/.", "~/x/..", "~/", "$HOME/"])
            rest = value[len(HOME):]
            return word + rest
        if move == 6:
            return value.rstrip("/") if value.endswith("/") else value + r.choice(["/", "\\", "/*", "\\*"])
        if move == 7:
            return value.replace("/", "//", 1)
        if move == 8:
            return value.swapcase()
        if move == 9:
            tags.add("unicode")
            return unicodedata.normalize(r.choice(["NFC", "NFD", "NFKC"]), value)
        if move == 10:
            i = r.randrange(len(value) + 1)
            return value[:i] + r.choice(["\\*", "\\", ".", "(", "[", "^", "$", "|", "{2}", "\\?"]) + value[i:]
        if move == 11 and surface == "bash":
            words = value.split(" ")
            return " ".join(words[: r.randint(1, max(1, len(words)))]) + r.choice([" *", "*", "", " * *"])
        if move == 12:
            tags.add("odd-key")
            return r.choice(["0", "7", "42", "4294967294", "4294967295", "-1", "01", "__proto__",
                             "constructor", "toString", "hasOwnProperty", "__defineGetter__"])
        if move == 13:
            return value + " *"
        if move == 14:
            tags.add("astral")
            return value.replace("😀", "??") if "😀" in value else value + "?"
        return r.choice([value[: len(value) // 2], value + "x", "x" + value])

    def reason(self, tags: set[str]) -> str:
        r = self.r
        kind = r.randrange(6)
        if kind == 0:
            tags.add("reason-utf16")
            return "😀" * r.randint(240, 260)  # 480..520 UTF-16 units, 240..260 code points
        if kind == 1:
            return "x" * r.choice([499, 500, 501])
        if kind == 2:
            return ""
        return r.choice(["keys stay put", "no: never", "#not a comment", "ünï 😀", "a\tb"])

    def action(self, tags: set[str]) -> object:
        state = self.pick(STATES)
        if state == "deny" and self.r.random() < 0.3:
            if self.r.random() < 0.1:
                return {"action": "deny"}
            return {"action": "deny", "reason": self.reason(tags)}
        return state

    def block(self, surface: str, values: list[str], tags: set[str]) -> dict[str, object]:
        r = self.r
        block: dict[str, object] = {}
        if r.random() < 0.3:
            block["*"] = self.pick(STATES)
        keys = [surface]
        if r.random() < 0.25:
            keys.append(r.choice(["bash", "read", "path", "external_directory", "mcp", "skill", "task",
                                  "write", "edit"]))
        if r.random() < 0.1:
            tags.add("surface-key")
            keys.append(r.choice(["~", "$HOME", f"{surface} *", f"{surface}?", f"?{surface[1:]}",
                                  f"{surface[:2]}*", "*", " " + surface, surface + " ", surface.upper(),
                                  "0", "__proto__", "path_*", "*_read"]))
        for key in keys:
            if r.random() < 0.2:
                block[key] = self.pick(STATES)
                continue
            pool = values or ["*"]
            patterns: dict[str, object] = {}
            for _ in range(r.randint(1, 5)):
                patterns[self.derive(key, self.pick(pool), tags)] = self.action(tags)
            if r.random() < 0.3:
                patterns = {"*": self.pick(STATES), **patterns}
            block[key] = patterns
        return block

    # -- files ---------------------------------------------------------------------------------

    def config_json(self, block: dict[str, object], tags: set[str]) -> bytes:
        r = self.r
        doc: dict[str, object] = {}
        if r.random() < 0.12:
            tags.add("knob")
            key, value = r.choice([
                ("toolInputPreviewMaxLength", 2**53 + 2), ("toolInputPreviewMaxLength", 1e20),
                ("toolInputPreviewMaxLength", 5.0), ("toolTextSummaryMaxLength", 2**53 - 1),
                ("toolTextSummaryMaxLength", 0.5), ("debugLog", "true"), ("debugLog", False),
                ("permissionReviewLog", 1), ("piInfrastructureReadPaths", ["~/x", ""]),
                ("piInfrastructureReadPaths", []), ("doublePressToConfirm", True),
                ("shellTools", {"exec": {"commandArgument": "cmd"}}),
                ("shellTools", {"exec": {"commandArgument": ""}}),
                ("shellTools", {"": {"commandArgument": "cmd"}}),
                ("$schema", 3), ("$schema", "x")])
            doc[key] = value
        doc["permission"] = block
        text = json.dumps(doc, ensure_ascii=r.random() < 0.4, indent=r.choice([None, 1, "\t"]))
        if r.random() < 0.08:
            tags.add("jsonc")
            text = "/* rules */\n" + text.replace("\n", " // note\n", 1) + "\n// end"
        data = text.encode("utf-8", "surrogatepass")
        return self.corrupt(data, tags)

    def corrupt(self, data: bytes, tags: set[str]) -> bytes:
        r = self.r
        if r.random() < 0.05:
            tags.add("bad-utf8")
            quote = data.find(b'": "')
            at = data.find(b'"', quote + 4) if quote >= 0 else -1
            if at > 0:  # inside a string value, so the JSON/frontmatter still parses
                bad = r.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xe2\x82", b"\x80"])
                return data[:at] + bad + data[at:]
        if r.random() < 0.02:
            tags.add("bom")
            return b"\xef\xbb\xbf" + data
        return data

    def frontmatter(self, block: dict[str, object], tags: set[str]) -> bytes:
        r = self.r
        indent = r.choice(["  "] * 8 + ["    ", "\t", " \t", "\u00a0\u00a0", "\u3000"])
        if indent not in ("  ", "    "):
            tags.add("fm-indent")
        lines = ["name: helper", f"description: {r.choice(['plain', 'with: colon', 'ünï', '# hash'])}"]
        if r.random() < 0.05:
            tags.add("fm-proto")
            lines += ["__proto__:", f"{indent}permission:", f"{indent * 2}bash: deny"]
        lines.append(r.choice(["permission:"] * 12 + ["permission:  # rules", "'permission':",
                                                      "\"permission\" :", "permission :"]))
        for key, value in block.items():
            qkey = self.yaml_key(key, tags)
            if isinstance(value, str):
                lines.append(f"{indent}{qkey}: {self.yaml_scalar(value, tags)}")
                continue
            lines.append(f"{indent}{qkey}:")
            assert isinstance(value, dict)
            for pattern, action in value.items():
                pkey = self.yaml_key(pattern, tags)
                if isinstance(action, dict):
                    lines.append(f"{indent * 2}{pkey}:")
                    lines.append(f"{indent * 3}action: deny")
                    if "reason" in action:
                        lines.append(f"{indent * 3}reason: {self.yaml_scalar(str(action['reason']), tags)}")
                else:
                    lines.append(f"{indent * 2}{pkey}: {self.yaml_scalar(action, tags)}")
        if r.random() < 0.05:
            tags.add("fm-twice")
            lines += ["permission:", f"{indent}{next(iter(block), 'bash')}: {self.pick(STATES)}"]
        close = r.choice(["---"] * 14 + ["---x", "----", "--- ", "...", ""])
        if close != "---":
            tags.add("fm-close")
        tail = r.choice(["", "\n# Agent\n", "\nbody\n---\npermission:\n  bash: deny\n"])
        newline = r.choice(["\n"] * 12 + ["\r\n", "\r"])
        if newline != "\n":
            tags.add("fm-newline")
        opener = r.choice(["---"] * 20 + ["--- ", " ---", "---\t"])
        if opener != "---":
            tags.add("fm-open")
        text = newline.join([opener, *lines, close]) + tail
        data = text.encode("utf-8", "surrogatepass")
        return self.corrupt(data, tags)

    def yaml_key(self, key: str, tags: set[str]) -> str:
        r = self.r
        simple = key and all(c.isalnum() or c in "_-" for c in key)
        if simple and r.random() < 0.8:
            return key
        style = r.randrange(5)
        if style == 0 or not key:
            return json.dumps(key, ensure_ascii=False)
        if style == 1 and "'" not in key:
            return f"'{key}'"
        if style == 2:
            tags.add("fm-quote")
            return f"'{key}\""  # mismatched quotes: pi cuts one from each end
        if style == 3 and ":" not in key and "#" not in key and not key.startswith(("-", "'", '"')):
            return key
        return json.dumps(key, ensure_ascii=False)

    def yaml_scalar(self, value: str, tags: set[str]) -> str:
        r = self.r
        style = r.randrange(10)
        if style == 0:
            return f'"{value}"'
        if style == 1:
            return f"'{value}'"
        if style == 2:
            tags.add("fm-comment")
            return f"{value} # why"
        if style == 3:
            tags.add("fm-quote")
            return f"\"{value}'"
        return value

    # -- a case --------------------------------------------------------------------------------

    def case(self) -> Case:
        r = self.r
        tags: set[str] = set()
        surface, values = self.ask(tags)
        agent = self.pick(AGENTS)
        files: dict[str, bytes] = {}
        for layer in r.choice([("g",), ("g", "p"), ("g", "a"), ("g", "p", "a", "pa"), ("a", "pa"),
                               ("p", "a"), ("g", "pa"), ("g", "p", "a")]):
            block = self.block(surface, values, tags)
            if layer == "g":
                files[GLOBAL] = self.config_json(block, tags)
            elif layer == "p":
                files[PROJECT] = self.config_json(block, tags)
            else:
                folder = "a/agents" if layer == "a" else "p/.pi/agents"
                if agent and "\x00" not in agent:
                    files[f"{folder}/{agent}.md"] = self.frontmatter(block, tags)
                    tags.add("agent-file")
        if agent not in ("Explore", "builder", "reviewer"):
            tags.add("odd-agent")
        if any(ord(c) > 0xFFFF for v in values for c in v):
            tags.add("astral")
        tags.add(f"surface:{surface if surface in ('bash', 'mcp', 'skill') or surface in PATHS else 'tool'}")
        boundary = r.choice([values[0] if values else None, None, "/etc/shadow", HOME, "*"])
        cwd = r.choice(["/repo", HOME, "/", "", "~", "/srv/other"])
        display = r.choice([agent, agent, "Explore", "unknown", "reviewer"])
        return Case(files, agent, surface, values, tags, boundary, cwd, display)


# -- judging -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    state: str
    pattern: str | None
    origin: str | None


def ours(case: Case, root: Path) -> tuple[Verdict, bool]:
    """As `pi-authorizer explain --json`: the request file read by the wire layer, then explain."""
    parsed = parse_request(case.request())
    store = PolicyStore(root / "a", root / "p", home=HOME)
    result = explain(store, parsed.facts, parsed.agent_name)
    outcome = result.resolution.outcome
    if outcome is None:
        return Verdict(result.verdict, None, None), False
    noted = any(step.get("step") == "pi-reading" for step in result.trail)
    return Verdict(result.verdict, outcome.matched_pattern, outcome.origin), noted


def start_node(calls: list[dict[str, object]], folder: Path) -> subprocess.Popen[bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "in.json").write_text(json.dumps(calls), encoding="ascii")
    node = shutil.which("node") or "node"
    with (folder / "in.json").open("rb") as stdin, (folder / "out.json").open("wb") as out, \
            (folder / "err.txt").open("wb") as err:
        return subprocess.Popen(
            [node, str(NODE_DIR / "node_modules" / "tsx" / "dist" / "cli.mjs"), str(NODE_DIR / "judge.ts")],
            cwd=NODE_DIR, stdin=stdin, stdout=out, stderr=err, start_new_session=True,
            env={"HOME": HOME, "PATH": os.environ.get("PATH", "/usr/bin:/bin")})


def finish_node(proc: subprocess.Popen[bytes], folder: Path, count: int) -> list[Verdict] | None:
    try:
        proc.wait(timeout=600)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None
    if proc.returncode != 0:
        raise RuntimeError((folder / "err.txt").read_text()[-2000:])
    lines = [ln for ln in (folder / "out.json").read_text(encoding="utf-8").split("\n") if ln.strip()]
    rows = json.loads(lines[-1])
    assert len(rows) == count, (len(rows), count)
    out = []
    for row in rows:
        if "error" in row:
            raise RuntimeError(row["error"])
        out.append(Verdict(row["state"], row["matchedPattern"], row["origin"]))
    return out


def classify(mine: Verdict, theirs: Verdict, noted: bool, case: Case) -> str:
    if mine == theirs:
        return "identical"
    if mine.state == theirs.state:
        return "other-rule"
    # Asks on a directional member (only newer children make them) follow the newer semantics
    # (docs/design/fidelity.md, last row of the decided differences).
    directional = case.surface in DIRECTIONAL
    if RANK[mine.state] > RANK[theirs.state]:
        return "looser-directional" if directional else "LOOSER"
    return "stricter-noted" if noted or directional else "stricter-unnoted"


def run(total: int, seed: int, batch: int, show: int, dump: Path | None) -> int:
    gen = Gen(seed)
    work = Path(tempfile.mkdtemp(prefix="fid-unseen-"))
    classes: Counter[str] = Counter()
    by_tag: dict[str, Counter[str]] = defaultdict(Counter)
    examples: dict[str, list[str]] = defaultdict(list)
    out = dump.open("w") if dump else None
    started = time.monotonic()
    pending: tuple[list[Case], Path, subprocess.Popen[bytes]] | None = None

    def settle(cases: list[Case], folder: Path, proc: subprocess.Popen[bytes]) -> None:
        mine = [ours(c, folder / f"c{i}") for i, c in enumerate(cases)]
        theirs = finish_node(proc, folder / "node", len(cases))
        if theirs is None:
            classes["reference-timeout"] += len(cases)
            return
        for case, (verdict, noted), reference in zip(cases, mine, theirs, strict=True):
            kind = classify(verdict, reference, noted, case)
            classes[kind] += 1
            for tag in case.tags | {"all"}:
                by_tag[tag][kind] += 1
            if kind != "identical":
                if out:
                    out.write(json.dumps({"class": kind, "agent": case.agent, "surface": case.surface,
                                          "values": case.values, "tags": sorted(case.tags),
                                          "files": {k: v.decode("utf-8", "backslashreplace")
                                                    for k, v in case.files.items()},
                                          "ours": verdict.__dict__, "reference": reference.__dict__}) + "\n")
                if len(examples[kind]) < show:
                    examples[kind].append(f"{case.reproduction()}\n  ours: {verdict}\n  pi:   {reference}")
        shutil.rmtree(folder, ignore_errors=True)

    try:
        done = 0
        while done < total:
            size = min(batch, total - done)
            cases = [gen.case() for _ in range(size)]
            folder = work / f"b{done}"
            for i, case in enumerate(cases):
                case.write(folder / f"c{i}")
            calls = [c.reference_call(folder / f"c{i}") for i, c in enumerate(cases)]
            proc = start_node(calls, folder / "node")
            if pending:
                settle(*pending)
            pending = (cases, folder, proc)
            done += size
        if pending:
            settle(*pending)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if out:
            out.close()
    n = sum(classes.values())
    print(f"fidelity_unseen: seed {seed}, {n} cases, {time.monotonic() - started:.0f} s")
    for kind, count in classes.most_common():
        print(f"  {kind:20} {count:7} {100 * count / n:7.2f}%")
    print("by tag (identical/total, then the rest):")
    for tag in sorted(by_tag, key=lambda t: (t != "all", t)):
        c = by_tag[tag]
        m = sum(c.values())
        rest = ", ".join(f"{k} {v}" for k, v in sorted(c.items()) if k != "identical")
        print(f"  {tag:22} {c['identical']:6}/{m:<6} {100 * c['identical'] / m:6.2f}%  {rest}")
    for kind, items in examples.items():
        print(f"\n=== {kind} (first {len(items)}) ===")
        print("\n".join(items))
    return 1 if classes["LOOSER"] or classes["stricter-unnoted"] else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--show", type=int, default=6)
    parser.add_argument("--dump", type=Path)
    args = parser.parse_args()
    return run(args.cases, args.seed, args.batch, args.show, args.dump)


if __name__ == "__main__":
    sys.exit(main())
