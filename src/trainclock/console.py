"""The one rich Console that every listing command prints its tables to."""

from __future__ import annotations

from rich.console import Console

# A file or pipe has no width to fit; rich then assumes 80 columns and folds every cell of a wide
# table (MLPerf's system names, layouts) onto several lines. Wide enough to keep rows whole.
PIPE_WIDTH = 220


def table_console(console: Console | None = None) -> Console:
    """`console` (default: stdout), widened to PIPE_WIDTH when it is not a terminal."""
    console = console or Console()
    if not console.is_terminal:
        console.width = max(console.width, PIPE_WIDTH)
    return console
