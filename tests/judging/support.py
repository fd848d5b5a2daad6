"""A real local chat-completions server for the model judge's tests: stdlib `http.server` in a thread,
replaying the answers a test scripts (recorded model answers, garbage, errors, a reply held until the
test releases it), and keeping every request it received."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

NO = {"value": False, "confidence": 0.95}
YES = {"value": True, "confidence": 0.95}


def answers(reason: str = "looked at it", **said: dict[str, Any]) -> dict[str, Any]:
    """A whole answer: every question "no" unless said otherwise."""
    whole: dict[str, Any] = {q: NO for q in ("deletes_outside_project", "sends_data_off_machine",
                                             "modifies_system", "reads_secrets", "is_read_only")}
    whole.update(said)
    whole["reason"] = reason
    return whole


READ_ONLY = answers("it only lists files", is_read_only=YES)
READS_SECRETS = answers("it reads the ssh key", reads_secrets=YES)


@dataclass
class Reply:
    """One scripted reply: `content` as the model's message, or a raw `status`/`body`; `hold`: the
    server waits for it to be set first (a slow model the test controls)."""

    content: str | None = None
    status: int = 200
    body: bytes | None = None
    hold: threading.Event | None = None


def model_says(answer: dict[str, Any] | str) -> Reply:
    content = answer if isinstance(answer, str) else json.dumps(answer)
    return Reply(content=content)


@dataclass
class ChatServer:
    """The scripted replies (`replies`, in order; the last one repeats) and what was asked."""

    url: str = ""
    replies: deque[Reply] = field(default_factory=deque)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def script(self, *replies: Reply) -> None:
        with self.lock:
            self.replies.clear()
            self.replies.extend(replies)

    def next_reply(self) -> Reply:
        with self.lock:
            return self.replies.popleft() if len(self.replies) > 1 else self.replies[0]

    @property
    def user_prompts(self) -> list[str]:
        return [r["messages"][1]["content"] for r in self.requests]


@contextmanager
def chat_server() -> Iterator[ChatServer]:
    """A server on 127.0.0.1 at a free port, `url` its base (`.../v1`); stopped on exit."""
    state = ChatServer()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length))
            with state.lock:
                state.requests.append(body)
                state.headers.append(dict(self.headers.items()))
            reply = state.next_reply()
            if reply.hold is not None:
                reply.hold.wait(30)
            if reply.body is not None:
                data = reply.body
            else:
                data = json.dumps({"id": "x", "object": "chat.completion", "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": reply.content},
                     "finish_reason": "stop"}]}).encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up (a timeout the test drove)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the tests read `requests`."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
