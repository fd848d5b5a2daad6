"""How the model judge reaches a model: an OpenAI-compatible chat-completions endpoint (`httpx`), or a
command (e.g. the `llm` CLI) that reads the prompt on stdin and prints the answer.

Either returns the model's raw answer text or raises `JudgeFailure` with a reason; the questions, the
schema and the mapping are `core.judging.judge_questions`. The API key comes from an environment
variable or an owner-only file, goes only into the `Authorization` header, and is scrubbed from every
reason this module writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from core.clock import SYSTEM_CLOCK, Clock
from core.disk.private import NotPrivate, read_private
from core.judging.judge_questions import SYSTEM_PROMPT, answers_schema

if TYPE_CHECKING:
    import httpx

T = TypeVar("T")
DEFAULT_JUDGE_TIMEOUT_S = 5.0
#: The most of a reply read (an answer is a few hundred bytes).
MAX_REPLY = 256 * 1024


class JudgeFailure(Exception):
    """The model gave no usable answer: the reason is said (and the judge defers)."""


class ModelClient(Protocol):
    """One way to put the prompt to a model."""

    @property
    def describe(self) -> str: ...

    async def ask(self, user: str) -> str:
        """The model's answer text (the JSON object), or `JudgeFailure`."""
        ...

    async def close(self) -> None: ...


class KeyFileError(ValueError):
    """The API key file cannot be used (missing, readable by others, not ours)."""


def read_key_file(path: Path) -> str:
    """The key in `path`: refused unless it is a regular file of this user that only it can read."""
    try:
        key = read_private(path, "API key file", 64 * 1024).decode("utf-8", "replace").strip()
    except NotPrivate as exc:
        raise KeyFileError(str(exc)) from None
    if not key:
        raise KeyFileError(f"{path}: empty")
    return key


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore")
    content: str | None = None
    refusal: str | None = None


class _Choice(BaseModel):
    model_config = ConfigDict(extra="ignore")
    message: _Message


class _Completion(BaseModel):
    model_config = ConfigDict(extra="ignore")
    choices: list[_Choice]


def chat_request(model: str, user: str) -> dict[str, Any]:
    """The body POSTed to `/chat/completions`: structured output by JSON schema, no tools."""
    return {
        "model": model,
        "temperature": 0,
        "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "permission_judge_answers", "strict": True, "schema": answers_schema()},
        },
    }


@dataclass
class ChatEndpoint:
    """An OpenAI-compatible server: `url` is its base (`http://127.0.0.1:11434/v1`) or the full
    `.../chat/completions` address."""

    url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = DEFAULT_JUDGE_TIMEOUT_S
    _client: httpx.AsyncClient | None = field(default=None, init=False, repr=False)

    @property
    def describe(self) -> str:
        return f"{self.endpoint} (model {self.model})"

    @property
    def endpoint(self) -> str:
        base = self.url.rstrip("/")
        return base if base.endswith("/chat/completions") else f"{base}/chat/completions"

    async def ask(self, user: str) -> str:
        import httpx  # here, not at the top: httpx imports its command line's Rich, which core never loads

        if self._client is None:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            # httpx's own timeout is a backstop: the judge's deadline runs on the node's clock.
            self._client = httpx.AsyncClient(headers=headers, timeout=self.timeout_s + 5.0,
                                             follow_redirects=False, trust_env=False)
        try:
            reply = await self._client.post(self.endpoint, json=chat_request(self.model, user))
        except httpx.HTTPError as exc:
            raise JudgeFailure(self._scrub(f"the call failed: {type(exc).__name__}: {exc}")) from None
        if reply.status_code in (401, 403):
            raise JudgeFailure(f"authentication failed (HTTP {reply.status_code})")
        if reply.status_code != 200:
            raise JudgeFailure(self._scrub(f"HTTP {reply.status_code}: {reply.text[:200]!r}"))
        if len(reply.content) > MAX_REPLY:
            raise JudgeFailure(f"the reply is over {MAX_REPLY} bytes")
        try:
            completion = _Completion.model_validate_json(reply.content)
        except ValidationError:
            raise JudgeFailure("the reply is not a chat completion") from None
        if not completion.choices:
            raise JudgeFailure("the reply has no choice")
        message = completion.choices[0].message
        if message.refusal:
            raise JudgeFailure("the model refused to answer")
        if not message.content:
            raise JudgeFailure("the reply has no content")
        return message.content

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _scrub(self, text: str) -> str:
        return text.replace(self.api_key, "<key>") if self.api_key else text


@dataclass
class CommandModel:
    """A command that reads the whole prompt (system, then the facts and questions) on stdin and
    prints the JSON answer on stdout; the schema is given in `PI_AUTHORIZER_JUDGE_SCHEMA`."""

    argv: tuple[str, ...]

    @property
    def describe(self) -> str:
        return shlex.join(self.argv)

    async def ask(self, user: str) -> str:
        prompt = f"{SYSTEM_PROMPT}\n\n{user}\n".encode()
        env = dict(os.environ, PI_AUTHORIZER_JUDGE_SCHEMA=json.dumps(answers_schema()))
        try:
            process = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, start_new_session=True, env=env)
        except OSError as exc:
            raise JudgeFailure(f"could not start {self.argv[0]!r}: {exc.strerror or exc}") from None
        try:
            stdout, stderr = await process.communicate(prompt)
        except asyncio.CancelledError:
            _kill(process)
            await asyncio.shield(process.wait())  # reaped: no zombie left behind
            raise
        if process.returncode != 0:
            tail = stderr.decode(errors="replace").strip()[-200:]
            raise JudgeFailure(f"exit status {process.returncode}: {tail!r}")
        if len(stdout) > MAX_REPLY:
            raise JudgeFailure(f"output over {MAX_REPLY} bytes")
        return stdout.decode("utf-8", "replace").strip()

    async def close(self) -> None:
        """Nothing is kept between asks."""


def _kill(process: asyncio.subprocess.Process) -> None:
    """The command's whole process group (started in its own session)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


async def before(work: Awaitable[T], seconds: float, clock: Clock = SYSTEM_CLOCK) -> T:
    """`work`'s result, or `TimeoutError` when `seconds` pass first on `clock` (work cancelled)."""
    task = asyncio.ensure_future(work)
    timer = asyncio.ensure_future(clock.wait(asyncio.Event(), seconds))
    try:
        done, _ = await asyncio.wait((task, timer), return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    if task not in done:
        raise TimeoutError
    return task.result()


def model_client(spec: str, model: str, api_key: str | None, timeout_s: float) -> ModelClient:
    """`http(s)://...` is an endpoint; anything else a command (shell-style quoting, no shell)."""
    if spec.startswith(("http://", "https://")):
        return ChatEndpoint(spec, model, api_key, timeout_s)
    argv = tuple(shlex.split(spec))
    if not argv:
        raise ValueError("the judge command is empty")
    return CommandModel((os.path.expanduser(argv[0]), *argv[1:]))
