"""History throughput and review-screen latency on a real SQLite file in a temp dir.

Run with `uv run python -m bench.bench_history`. Measures:
- rows recorded per second through the serve observer (one commit per arrival), and whole asks per
  second through the serving path (arrival, durable fsynced verdict, written mark: three commits);
- opening the review screen over 100,000 rows: until its rows are painted (headless), and until the
  summary line (computed by a thread worker) is shown;
- applying a filter over them: the same two moments.
Targets: >= 5,000 inserts/s, open < 300 ms, filter < 100 ms.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from textual.app import App
from textual.strip import Strip

from core.history import HistoryFilter, HistoryStore, Retention
from core.serving.verdicts import VerdictRecord, WrittenMark
from core.vocabulary.asks import AskKey
from core.vocabulary.events import ServeEvent
from core.wire.decisions import UserDecision
from core.wire.reader import parse_request
from core.wire.response import approve, encode_response
from tui.screens.review import ReviewScreen
from tui.widgets.history_list import HistoryList

ROWS = 100_000
ASKS = 2_000
AGENTS = ("Explore", "Plan", "Build", "Review", "Docs")
COMMANDS = ("git status", "git diff", "npm test", "cargo build", "make check", "ls -la", "rm -rf build")


def request_bytes(i: int) -> bytes:
    body = {
        "id": f"r{i}",
        "createdAt": time.time() * 1000,
        "requesterSessionId": "child",
        "targetSessionId": "s",
        "requesterAgentName": AGENTS[i % 5],
        "surface": "bash",
        "value": COMMANDS[i % 7],
        "message": f"Allow {COMMANDS[i % 7]}?",
        "accessIntent": {
            "surface": "bash",
            "matchValues": [f"{COMMANDS[i % 7]} {i}"],
            "boundaryValue": None,
            "requesterCwd": "/w",
            "principal": {"sessionId": "child", "agentName": AGENTS[i % 5]},
        },
    }
    return json.dumps(body).encode()


def synthetic_rows(n: int) -> list[dict[str, object]]:
    rng = random.Random(7)  # noqa: S311 (reproducible test data)
    now = time.time()
    rows: list[dict[str, object]] = []
    for i in range(n):
        verdict = rng.choice(("approved", "approved", "denied", "denied_with_reason", None))
        rows.append(
            {
                "served_session": "s",
                "request_name": f"r{i}.json",
                "request_id": f"r{i}",
                "raw": request_bytes(i),
                "agent": AGENTS[i % 5],
                "surface": rng.choice(("bash", "bash", "read", "mcp")),
                "value": f"{COMMANDS[i % 7]} {i}",
                "message": f"Allow {COMMANDS[i % 7]}?",
                "facts": "{}",
                "arrived_at": now - n + i,
                "verdict": verdict,
                "outcome": "user" if verdict else "withdrawn",
                "decider": "person (dialog)" if verdict else None,
                "decide_ms": rng.uniform(300, 20_000),
            }
        )
    return rows


def bench_inserts(folder: Path) -> tuple[float, float]:
    store = HistoryStore(folder / "inserts.sqlite3", Retention(max_age_s=None, max_rows=None))
    parsed = [parse_request(request_bytes(i)) for i in range(ASKS)]
    started = time.perf_counter()
    for i, p in enumerate(parsed):
        store.observe(ServeEvent("arrived", AskKey("s", f"a{i}.json"), time.time(), parsed=p, raw=p.raw))
    arrivals = ASKS / (time.perf_counter() - started)
    response = approve(responder="s", at_ms=0, decided_by=UserDecision(via="dialog"))
    body = encode_response(response)
    started = time.perf_counter()
    for i, p in enumerate(parsed):
        key = AskKey("s", f"r{i}.json")
        store.observe(ServeEvent("arrived", key, time.time(), parsed=p, raw=p.raw))
        store.record_verdicts([VerdictRecord(key, p, response, body, "user")])
        store.mark_written([WrittenMark(key, p.request.id, True)])
    asks = ASKS / (time.perf_counter() - started)
    store.close()
    return arrivals, asks


class Host(App[None]):
    pass


class Painted:
    """When the list last drew a line: the moment a person sees the rows."""

    def __init__(self) -> None:
        self.at = 0.0
        original = HistoryList.render_line

        def render_line(widget: HistoryList, y: int) -> Strip:
            self.at = time.perf_counter()
            return original(widget, y)

        HistoryList.render_line = render_line  # type: ignore[method-assign,assignment]

    async def wait(self, since: float) -> float:
        while self.at < since:  # noqa: ASYNC110 (polls a timestamp the renderer sets)
            await asyncio.sleep(0.001)
        return self.at - since


async def bench_screen(store: HistoryStore) -> tuple[float, float, dict[str, tuple[float, float]]]:
    """(open → rows painted, open → summary shown, per filter: (rows painted, summary shown))."""
    painted = Painted()
    app = Host()
    async with app.run_test(size=(160, 50)) as pilot:
        started = time.perf_counter()
        screen = ReviewScreen(store)
        await app.push_screen(screen)
        opened = await painted.wait(started)
        await app.workers.wait_for_complete()
        summarised = time.perf_counter() - started
        filters: dict[str, tuple[float, float]] = {}
        for text in ("agent:Plan", "verdict:denied surface:bash", "git diff 4", "agent:Docs npm", ""):
            rows, summaries = [], []
            for _ in range(3):
                await pilot.pause()
                started = time.perf_counter()
                screen.apply_filter(HistoryFilter.parse(text))
                rows.append(await painted.wait(started))
                await app.workers.wait_for_complete()
                summaries.append(time.perf_counter() - started)
            filters[text or "(none)"] = (statistics.median(rows), statistics.median(summaries))
    return opened, summarised, filters


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        arrivals, asks = bench_inserts(folder)
        print(f"arrivals recorded:            {arrivals:8,.0f} rows/s (one commit each; target >= 5,000)")
        print(f"whole asks through the ledger: {asks:8,.0f} asks/s (3 commits, verdict fsynced)")
        store = HistoryStore(folder / "review.sqlite3", Retention(max_age_s=None, max_rows=None))
        started = time.perf_counter()
        store.insert_rows(synthetic_rows(ROWS))
        bulk = ROWS / (time.perf_counter() - started)
        print(f"bulk insert (import path):    {bulk:8,.0f} rows/s")
        opened, summarised, filters = asyncio.run(bench_screen(store))
        print(
            f"review screen, {ROWS:,} rows: rows painted {opened * 1000:6.1f} ms (target < 300), "
            f"summary line {summarised * 1000:6.1f} ms"
        )
        for text, (rows, summary) in filters.items():
            print(
                f"filter {text!r:30} rows painted {rows * 1000:6.1f} ms (target < 100), "
                f"summary line {summary * 1000:6.1f} ms"
            )


if __name__ == "__main__":
    main()
