"""Shared by the launcher tests: a parser with the commands under test, and fake programs on PATH."""

from __future__ import annotations

import argparse
import stat
from pathlib import Path

from trainclock.commands import launch, scale


def parse(argv: list[str]) -> argparse.Namespace:
    """Parse like the real CLI would, with the launch and scale commands registered."""
    parser = argparse.ArgumentParser(prog="trainclock")
    sub = parser.add_subparsers(required=True)
    launch.register(sub)
    scale.register(sub)
    return parser.parse_args(argv)


def run_command(argv: list[str]) -> int:
    args = parse(argv)
    return args.func(args)


def fake_program(folder: Path, name: str, body: str) -> Path:
    """An executable shell script `name` in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path
