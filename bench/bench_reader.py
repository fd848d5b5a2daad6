"""Reading a request and encoding its response, per ask, in several checkouts (issue 37).

Run: `uv run python -m bench.bench_reader [--checkout PATH ...] [--rounds 5]`.

Each checkout (default: this one) times, in a fresh interpreter with that checkout first on its
path, `parse_request` of realistic request files (the race's, with and without facts; a 20.7.3
child's; the newest child's with payload, grants and asking units) and `encode_response` of the
usual verdicts: µs of CPU per call (`time.process_time`: a busy machine's waits left out), the best
of 25 repeats of 1,000. Checkouts are run in turn, rounds alternated;
the table keeps each one's best round. Write the load average next to any figure you keep.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from bench.bench_race import with_facts
from bench.roundtrip import REPO, base_request

NEWEST: dict[str, object] = {
    "id": "toolu_01AbCdEf", "createdAt": 1790000000000,
    "requesterSessionId": "019ff96a-1111-7000-8000-aaaaaaaaaaaa",
    "targetSessionId": "019ff969-c34c-70be-9034-fae19c852932", "requesterAgentName": "Explore",
    "message": "Agent 'Explore' requested bash command 'git push origin main'. Allow this command?",
    "payload": {
        "kind": "bash",
        "request": {
            "requester": {"agentName": "Explore", "forwarded": False, "sessionId": None},
            "surface": "bash", "toolName": "bash", "invokedToolName": None, "value": "git push origin main",
            "matchedPattern": "git *", "commandContext": None, "executedUnit": None,
        },
        "evidence": [{"label": "command", "text": "git push origin main", "detail": None}],
        "annotations": [],
    },
    "source": "tool_call", "surface": "bash", "value": "git push origin main",
    "sessionApproval": {"grants": [{"surface": "bash", "pattern": "git push *"}]},
    "accessIntent": {
        "surface": "bash", "matchValues": ["git push origin main"], "boundaryValue": None,
        "requesterCwd": "/worktree/issue-42",
        "principal": {"sessionId": "019ff96a-1111-7000-8000-aaaaaaaaaaaa", "agentName": "Explore"},
        "askingUnits": [{"command": "git push origin main"}],
    },
}
LEGACY: dict[str, object] = {
    "id": "1752600000123-k3j9x0qa-48211", "createdAt": 1752600000123,
    "requesterSessionId": "019ff96a-1111-7000-8000-aaaaaaaaaaaa",
    "targetSessionId": "019ff969-c34c-70be-9034-fae19c852932", "requesterAgentName": "Explore",
    "message": "Agent 'Explore' requested bash command 'git push origin main' (matched 'git *').",
    "source": "tool_call", "surface": "bash", "value": "git push origin main",
    "sessionApproval": {"surface": "bash", "patterns": ["git push *"]},
}

# Run inside each checkout's code: request bodies come on stdin, µs per call go to stdout.
_TIMER = """
import json, sys, time, timeit
sys.path.insert(0, sys.argv[1])
from core.wire.decisions import RuleDecision
from core.wire.reader import parse_request
from core.wire.response import approve, deny, encode_response
bodies = {name: text.encode() for name, text in json.load(sys.stdin).items()}
rule = RuleDecision(surface="bash", pattern="git *", origin="global")
verdicts = {
    "encode: approve (rule)": approve(responder="bench-session", at_ms=1790000000000, decided_by=rule),
    "encode: deny (fail-safe)": deny(responder="bench-session", at_ms=1790000000000, decided_by=None,
                                     reason="no person answered in time (fail-safe deny)"),
}
cases = {f"read: {name}": (lambda body=body: parse_request(body)) for name, body in bodies.items()}
cases.update({name: (lambda v=v: encode_response(v)) for name, v in verdicts.items()})
out = {}
for name, fn in cases.items():
    out[name] = min(timeit.repeat(fn, number=1000, repeat=25, timer=time.process_time)) / 1000 * 1e6
print(json.dumps(out))
"""


def bodies() -> dict[str, str]:
    return {
        "race, no facts": json.dumps(base_request("bench-000001")),
        "race, facts": json.dumps(with_facts("bench-000001")),
        "20.7.3 child": json.dumps(LEGACY, separators=(",", ":")),
        "newest child": json.dumps(NEWEST, separators=(",", ":")),
    }


def time_checkout(checkout: Path) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", _TIMER, str(checkout)], input=json.dumps(bodies()),
                          capture_output=True, text=True, check=True, cwd=checkout)
    return dict(json.loads(done.stdout))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--checkout", action="append", type=Path, help="a checkout to time (repeatable)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    checkouts: list[Path] = args.checkout or [REPO]
    best: dict[Path, dict[str, float]] = {c: {} for c in checkouts}
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    for _ in range(args.rounds):
        for checkout in checkouts:
            for name, us in time_checkout(checkout).items():
                best[checkout][name] = min(us, best[checkout].get(name, us))
    print(f"load average at end: {os.getloadavg()[0]:.2f}; µs per call, best of {args.rounds} rounds")
    names = list(best[checkouts[0]])
    print(f"{'':28s}" + "".join(f"{str(c)[-24:]:>26s}" for c in checkouts))
    for name in names:
        print(f"{name:28s}" + "".join(f"{best[c].get(name, float('nan')):26.1f}" for c in checkouts))


if __name__ == "__main__":
    main()
