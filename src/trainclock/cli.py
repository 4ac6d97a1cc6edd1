"""trainclock's only entry point. Each subcommand lives in commands/<name>.py, which adds its
parser with `register(subparsers)` and calls into a package; this file only dispatches."""

from __future__ import annotations

import argparse
import errno
import os
import sys

from trainclock.commands import COMMANDS
from trainclock.errors import TrainclockError


# errno -> (what happened, what to do), for file errors no command turned into a one-line error itself
_FILE_ERRORS = {
    errno.ENOSPC: ("no space left on device writing", "free space or choose another output path"),
    errno.EDQUOT: ("disk quota exceeded writing", "free space or choose another output path"),
    errno.EACCES: ("permission denied on", "change its permissions or choose another path"),
    errno.EPERM: ("operation not permitted on", "change its permissions or choose another path"),
    errno.EROFS: ("read-only file system writing", "choose another output path"),
}


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; with argv, a command may add flags that depend on it (`run BENCHMARK` adds the
    benchmark's own flags)."""
    parser = argparse.ArgumentParser(prog="trainclock", description="Time-to-train benchmarks, MLPerf style.")
    sub = parser.add_subparsers(required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
        if argv and argv[0] == getattr(command, "NAME", None) and hasattr(command, "extend"):
            command.extend(sub.choices[command.NAME], argv[1:])
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = build_parser(argv).parse_args(argv)
        args.argv = argv  # a multi-process run re-executes itself with the same arguments
        return args.func(args)
    except TrainclockError as e:
        rank = os.environ.get("RANK") if int(os.environ.get("WORLD_SIZE", 1)) > 1 else None
        print(f"trainclock: error{f' (rank {rank})' if rank else ''}: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("trainclock: interrupted", file=sys.stderr)
        return 130
    except OSError as e:  # a write that failed where no command caught it: one line, not a traceback
        if e.errno not in _FILE_ERRORS:
            raise
        what, todo = _FILE_ERRORS[e.errno]
        print(f"trainclock: error: {what} {e.filename or 'a file'}; {todo}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
