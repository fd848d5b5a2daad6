"""`pi-authorizer demo`: the app on a temporary forwarding root with simulated children."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("demo", help="see it work on a simulated agent tree")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    print("pi-authorizer demo: the interactive app is not built yet; try `pi-authorizer serve`.")
    return 0
