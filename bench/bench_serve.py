"""Round trip of `serve --on-ask deny`: request renamed into the inbox → fail-safe response exists.

Run: `uv run python -m bench.bench_serve [COUNT]` (default 1,000). Target: p50 under 10 ms.
"""

from __future__ import annotations

import sys

from bench.roundtrip import base_request, measure, report


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    report("serve --on-ask deny round trip", measure(count, ["--on-ask", "deny"], base_request))


if __name__ == "__main__":
    main()
