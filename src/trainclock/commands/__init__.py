"""The CLI's subcommands, one module each. Adding a command: write commands/<name>.py with a
`register(subparsers)` function and list the module here."""

from trainclock.commands import data, list_benchmarks, plan, review, run

COMMANDS = [run, list_benchmarks, data, review, plan]
