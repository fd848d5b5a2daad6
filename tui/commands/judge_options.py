"""The model judge's options (`--judge URL|COMMAND` and the rest) and the settings they resolve to
(`core.judging.judge_setup`: the command line over `--judge-config FILE`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from core.judging.judge_setup import JudgeSettings, JudgeSettingsError, judge_settings, read_settings_file
from tui.commands.arguments import CliError, positive_float


def add_judge_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("model judge (docs/judge.md)")
    group.add_argument("--judge", default=None, metavar="URL|COMMAND",
                       help="a model judge after the links: an OpenAI-compatible chat endpoint "
                       "(http://127.0.0.1:11434/v1) or a command reading the prompt on stdin")
    group.add_argument("--judge-model", default=None, metavar="NAME", help="the endpoint's model name")
    group.add_argument("--judge-mode", default=None, choices=("decide", "advise"),
                       help="decide (default): its verdicts count, within the caps; advise: it only "
                       "shows its recommendation")
    group.add_argument("--judge-allow-surfaces", default=None, metavar="SURFACES",
                       help="comma-separated surfaces the judge may allow on (default none; never a path "
                       "surface)")
    group.add_argument("--judge-timeout", type=positive_float, default=None, metavar="SECONDS",
                       help="how long the judge may take before it defers (default 5)")
    group.add_argument("--judge-api-key-env", default=None, metavar="NAME",
                       help="the environment variable holding the endpoint's API key")
    group.add_argument("--judge-api-key-file", type=Path, default=None, metavar="FILE",
                       help="a file only you can read holding the endpoint's API key")
    group.add_argument("--judge-config", type=Path, default=None, metavar="FILE",
                       help="the judge's settings file (JSON: mapping table, breaker, ...); options win")


def judge_from_args(args: argparse.Namespace) -> JudgeSettings | None:
    """The judge's settings, or None without one; unusable settings end the command with one line."""
    config: Path | None = getattr(args, "judge_config", None)
    given = {
        "judge": getattr(args, "judge", None),
        "model": getattr(args, "judge_model", None),
        "mode": getattr(args, "judge_mode", None),
        "allowSurfaces": getattr(args, "judge_allow_surfaces", None),
        "timeoutS": getattr(args, "judge_timeout", None),
        "apiKeyEnv": getattr(args, "judge_api_key_env", None),
        "apiKeyFile": getattr(args, "judge_api_key_file", None),
    }
    try:
        file = read_settings_file(config.expanduser()) if config is not None else None
        return judge_settings(given, file)
    except JudgeSettingsError as exc:
        raise CliError(f"judge: {exc}") from None
