"""The CLI's subcommands, one module each. Adding a command: write commands/<name>.py with a
`register(subparsers)` function and list the module here."""

from trainclock.commands import data, launch, list_benchmarks, plan, report, results, review, run, scale, serve

COMMANDS = [run, list_benchmarks, data, review, results, plan, launch, scale, report, serve]
