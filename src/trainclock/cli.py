"""trainclock's only entry point. Each subcommand lives in commands/<name>.py, which adds its
parser with `register(subparsers)` and calls into a package; this file only dispatches."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from trainclock.commands import COMMANDS
from trainclock.errors import TrainclockError, file_error


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
    except BrokenPipeError:  # the reader went away (`trainclock list --names | head`): nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes stdout
        return 141  # as a shell reports a process ended by SIGPIPE
    except OSError as e:  # a write that failed where no command caught it: one line, not a traceback
        message = file_error(e)  # for file errors no command turned into a one-line error itself
        if message is None:
            raise
        print(f"trainclock: error: {message}", file=sys.stderr)
        return 2


def exit_process(code: int) -> None:
    """Leave with `code`. A torchrun worker skips the interpreter's shutdown: objects that hold its
    process groups (the device mesh, sharded parameters, compiled graphs) are freed only there, after
    destroy_process_group, and gloo's threads then need the GIL of a dying interpreter: the process
    aborts ("terminate called without an active exception", pytorch/pytorch#179291) after its work
    is done, and torchrun kills the ranks still writing results. Its files are closed by then."""
    env = sys.modules.get("trainclock.distributed.env")  # a process that never loaded it made no process group
    if env is not None and env.under_torchrun():
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    exit_process(main())
