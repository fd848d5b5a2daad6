"""Scale of one `serve` process (issue 9): many sessions and children at once, and a deep pending inbox.

Why: `bench_scale` measures the matcher in-process; this measures the whole serving process, so a
leak or a per-ask cost that grows with the number of sessions, children or held asks shows up as
peak RSS (`VmHWM` of the serve process) and as latency.

Run: `uv run python -m bench.bench_scale_serve [--sessions 50 --children 20 --pending 10000]`.

- sessions × children: one `serve --on-ask deny` serving every session id; each child (a distinct
  `requesterAgentName`) writes one request into its session, all at once; arrival (rename) →
  response exists, p50/p99/max, and the time until every response exists.
- pending: one session, `serve --on-ask leave`: the asks stay pending; time until the serve log has
  a "left" line for each, then one rule-allowed control request's round trip (`--rules`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from bench.roundtrip import SESSION, base_request, start_serve
from core.disk.paths import encode_session_id


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def stop(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(30)


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p50 = ordered[len(ordered) // 2]
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50={p50:.1f} ms p99={p99:.1f} ms max={ordered[-1]:.1f} ms"


def inbox(root: Path, session_id: str) -> Path:
    session = root / "sessions" / encode_session_id(session_id)
    (session / "requests").mkdir(parents=True)
    (session / "responses").mkdir()
    return session


def many_sessions(sessions: int, children: int) -> None:
    ids = tuple([SESSION] + [f"{SESSION}-{i:03d}" for i in range(1, sessions)])
    with tempfile.TemporaryDirectory() as tmp:
        root, state, staging = Path(tmp) / "root", Path(tmp) / "state", Path(tmp) / "staging"
        dirs = {sid: inbox(root, sid) for sid in ids}
        staging.mkdir()
        staged: list[tuple[Path, Path, str, Path]] = []
        for sid, session in dirs.items():
            for child in range(children):
                rid = f"req-{child:03d}"
                body = base_request(rid) | {
                    "targetSessionId": sid, "requesterSessionId": f"{sid}-child-{child}",
                    "requesterAgentName": f"child-{child}",
                }
                temp = staging / f"{encode_session_id(sid)}-{rid}.json"
                temp.write_bytes(json.dumps(body).encode())
                staged.append((temp, session / "requests" / f"{rid}.json", sid, session / "responses"))
        proc = start_serve(root, state, ["--on-ask", "deny", "--agent-dir", tmp, "--project", tmp], ids)
        try:
            arrived: dict[tuple[str, str], float] = {}
            start = time.perf_counter()
            for temp, target, sid, _ in staged:
                os.rename(temp, target)
                arrived[(sid, target.name)] = time.perf_counter()
            answered: dict[tuple[str, str], float] = {}
            deadline = time.monotonic() + 300
            while len(answered) < len(staged) and time.monotonic() < deadline:
                for sid, session in dirs.items():
                    for name in os.listdir(session / "responses"):
                        if name.endswith(".json"):  # not the writer's temp file
                                    answered.setdefault((sid, name), time.perf_counter())
                time.sleep(0.001)
            total = time.perf_counter() - start
            rss = peak_rss_mb(proc.pid)
        finally:
            stop(proc)
    latencies = [(answered[key] - arrived[key]) * 1000 for key in answered]
    print(f"{sessions} sessions x {children} children ({len(staged)} asks at once, --on-ask deny): "
          f"{len(answered)} answered in {total:.2f} s; arrival->response {percentiles(latencies)}; "
          f"serve peak RSS {rss:.0f} MB")


def many_pending(pending: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root, state, staging = Path(tmp) / "root", Path(tmp) / "state", Path(tmp) / "staging"
        session = inbox(root, SESSION)
        rules = Path(tmp) / "rules.json"
        rules.write_text(json.dumps({"permission": {"bash": {"echo *": "allow"}}}))
        staging.mkdir()
        for i in range(pending):
            rid = f"pending-{i:06d}"
            body = base_request(rid) | {"requesterAgentName": f"child-{i % 100}"}
            (staging / f"{rid}.json").write_bytes(json.dumps(body).encode())
        extra = ["--on-ask", "leave", "--rules", str(rules), "--agent-dir", tmp, "--project", tmp]
        proc = start_serve(root, state, extra, stderr=subprocess.PIPE)
        seen = 0
        all_seen = threading.Event()

        def read_log() -> None:
            nonlocal seen
            assert proc.stderr is not None
            for line in proc.stderr:
                if b"left for another authorizer" in line:
                    seen += 1
                    if seen >= pending:
                        all_seen.set()

        reader = threading.Thread(target=read_log, daemon=True)
        reader.start()
        try:
            start = time.perf_counter()
            for path in sorted(staging.iterdir()):
                os.rename(path, session / "requests" / path.name)
            all_seen.wait(600)
            to_seen = time.perf_counter() - start
            control = base_request("control") | {"value": "echo hello", "accessIntent": {
                "surface": "bash", "matchValues": ["echo hello"], "boundaryValue": None, "requesterCwd": "/w",
                "principal": {"sessionId": "child", "agentName": "Explore"}}}
            temp = session / "requests" / f"control.json.{os.getpid()}.0.tmp"
            temp.write_bytes(json.dumps(control).encode())
            response = session / "responses" / "control.json"
            begin = time.perf_counter()
            os.rename(temp, session / "requests" / "control.json")
            while not response.exists() and time.perf_counter() - begin < 60:
                time.sleep(0.0001)
            control_ms = (time.perf_counter() - begin) * 1000
            status = json.loads(response.read_bytes()).get("state") if response.exists() else "none"
            rss = peak_rss_mb(proc.pid)
        finally:
            stop(proc)
    print(f"{pending} pending asks in one session (--on-ask leave): {seen} seen in {to_seen:.2f} s "
          f"({seen / to_seen:.0f}/s); then a rule-allowed control request: {control_ms:.1f} ms ({status}); "
          f"serve peak RSS {rss:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--children", type=int, default=20)
    parser.add_argument("--pending", type=int, default=10_000)
    args = parser.parse_args()
    many_sessions(args.sessions, args.children)
    many_pending(args.pending)


if __name__ == "__main__":
    main()
