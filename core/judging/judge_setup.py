"""The model judge's settings (the command line over an optional settings file) and the chain built
from them. The settings are the person's: a file a child could write (group- or world-writable, not
the person's) is refused, and so is a key file others can read.

Settings file (JSON, every key optional; the command line wins):
`{"judge": URL|COMMAND, "model": NAME, "mode": "decide"|"advise", "allowSurfaces": ["bash"],
"timeoutS": 5, "apiKeyEnv": NAME, "apiKeyFile": PATH, "mapping": [ROWS], "breaker": {"failures": 3,
"windowS": 60, "probeAfterS": 30}}` (`docs/judge.md`).
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.clock import SYSTEM_CLOCK, Clock
from core.judging.judge_breaker import Breaker
from core.judging.judge_client import DEFAULT_JUDGE_TIMEOUT_S, model_client, read_key_file
from core.judging.judge_questions import DEFAULT_MAPPING, MappingRow, parse_mapping
from core.judging.judge_record import JudgeRecord
from core.judging.model_judge import JudgeChain, JudgeMode, JudgePolicy, ModelJudge
from core.judging.recorded import LinkChain

_KEYS = {"judge", "model", "mode", "allowSurfaces", "timeoutS", "apiKeyEnv", "apiKeyFile", "mapping",
         "breaker"}


class JudgeSettingsError(ValueError):
    """The judge's settings cannot be used: said in one line, before serving."""


@dataclass(frozen=True)
class JudgeSettings:
    """Where the judge is and what it may do."""

    spec: str
    model: str = "default"
    api_key: str | None = field(default=None, repr=False)
    mode: JudgeMode = "decide"
    allow_surfaces: frozenset[str] = frozenset()
    mapping: tuple[MappingRow, ...] = DEFAULT_MAPPING
    timeout_s: float = DEFAULT_JUDGE_TIMEOUT_S
    failures: int = 3
    window_s: float = 60.0
    probe_after_s: float = 30.0


def read_settings_file(path: Path) -> dict[str, Any]:
    """The settings file's object; refused when someone else could have written it."""
    try:
        info = path.stat()
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise JudgeSettingsError(f"{path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise JudgeSettingsError(f"{path}: must be a file of yours that only you can write")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise JudgeSettingsError(f"{path}: not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise JudgeSettingsError(f"{path}: expected a JSON object")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise JudgeSettingsError(f"{path}: unknown key(s) {', '.join(unknown)}")
    return data


def judge_settings(given: dict[str, Any], file: dict[str, Any] | None = None) -> JudgeSettings | None:
    """`given` (the command line's values, None where not given) over `file`; None: no judge."""
    merged = dict(file or {})
    merged.update({k: v for k, v in given.items() if v is not None})
    spec = merged.get("judge")
    if spec is None:
        return None
    if not isinstance(spec, str) or not spec.strip():
        raise JudgeSettingsError("judge: expected a URL or a command")
    mode = merged.get("mode", "decide")
    if mode not in ("decide", "advise"):
        raise JudgeSettingsError("judge mode: expected decide or advise")
    surfaces = merged.get("allowSurfaces", [])
    if isinstance(surfaces, str):
        surfaces = [s.strip() for s in surfaces.split(",") if s.strip()]
    if not isinstance(surfaces, list) or not all(isinstance(s, str) and s for s in surfaces):
        raise JudgeSettingsError("allowSurfaces: expected surface names")
    timeout = merged.get("timeoutS", DEFAULT_JUDGE_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise JudgeSettingsError("timeoutS: expected a positive number of seconds")
    try:
        mapping = parse_mapping(merged["mapping"]) if "mapping" in merged else DEFAULT_MAPPING
    except ValueError as exc:
        raise JudgeSettingsError(str(exc)) from None
    breaker = merged.get("breaker", {})
    if not isinstance(breaker, dict) or set(breaker) - {"failures", "windowS", "probeAfterS"}:
        raise JudgeSettingsError("breaker: expected {failures, windowS, probeAfterS}")
    failures = breaker.get("failures", 3)
    window, probe = breaker.get("windowS", 60), breaker.get("probeAfterS", 30)
    if not (isinstance(failures, int) and failures >= 1 and all(
            isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in (window, probe))):
        raise JudgeSettingsError("breaker: failures >= 1, windowS and probeAfterS positive")
    model = merged.get("model", "default")
    if not isinstance(model, str) or not model:
        raise JudgeSettingsError("model: expected a model name")
    return JudgeSettings(spec.strip(), model, _api_key(merged), mode, frozenset(surfaces), mapping,
                         float(timeout), failures, float(window), float(probe))


def _api_key(merged: dict[str, Any]) -> str | None:
    env, file = merged.get("apiKeyEnv"), merged.get("apiKeyFile")
    if env is not None:
        if not isinstance(env, str) or not os.environ.get(env):
            raise JudgeSettingsError(f"apiKeyEnv: the environment variable {env!r} is not set")
        return os.environ[env]
    if file is not None:
        try:
            return read_key_file(Path(str(file)).expanduser())
        except ValueError as exc:
            raise JudgeSettingsError(f"apiKeyFile: {exc}") from None
    return None


def build_judge_chain(settings: JudgeSettings, links: LinkChain | None, state_dir: Path | None, *,
                      attended: bool, relaying: bool, clock: Clock = SYSTEM_CLOCK) -> JudgeChain:
    """The chain serving consults: the links, then the judge, its reviews recorded in `state_dir`."""
    try:
        client = model_client(settings.spec, settings.model, settings.api_key, settings.timeout_s)
    except ValueError as exc:
        raise JudgeSettingsError(str(exc)) from None
    policy = JudgePolicy(settings.mode, settings.allow_surfaces, settings.mapping, settings.timeout_s,
                         attended=attended, relaying=relaying)
    breaker = Breaker(settings.failures, settings.window_s, settings.probe_after_s, clock)
    try:
        record = JudgeRecord.in_state_dir(state_dir) if state_dir is not None else None
    except (sqlite3.Error, OSError) as exc:
        raise JudgeSettingsError(f"its record in {state_dir} cannot be opened: {exc}") from None
    return JudgeChain(ModelJudge(client, policy, breaker, clock), links,
                      record.add if record is not None else None, record.path if record is not None else None)


async def close_when_stopped(chain: JudgeChain, stop: asyncio.Event) -> None:
    """A serving core's background task: the judge's connections close when serving stops."""
    await stop.wait()
    await chain.close()
