"""Round trip of a rule-decided ask through `serve`: request renamed in → `approved` response exists.

Run: `uv run python -m bench.bench_rules_serve [COUNT]` (default 1,000). Target: p50 under 10 ms.
The node's config holds 500 rules, so the matcher works as it would on a large real config.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from bench.roundtrip import base_request, measure, report


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    with tempfile.TemporaryDirectory() as tmp:
        agent_dir = Path(tmp) / "agent"
        config = agent_dir / "extensions" / "pi-permission-system" / "config.json"
        config.parent.mkdir(parents=True)
        bash = {f"tool{i} *": ("deny" if i % 7 == 0 else "ask") for i in range(499)}
        bash["git *"] = "allow"
        config.write_text(json.dumps({"permission": {"bash": bash}}))

        def body(rid: str) -> dict[str, object]:
            request = base_request(rid)
            request["accessIntent"] = {
                "surface": "bash",
                "matchValues": [f"git status {rid}"],
                "boundaryValue": None,
                "requesterCwd": "/w",
                "principal": {"sessionId": "child", "agentName": "Explore"},
            }
            return request

        extra = ["--on-ask", "deny", "--agent-dir", str(agent_dir), "--project", str(Path(tmp) / "p")]
        report("serve rule-decided round trip (500-rule config)", measure(count, extra, body))


if __name__ == "__main__":
    main()
