"""One importing process of the concurrency test: once loaded, it says so by creating READY_FILE
and waits for START_FILE, so that every worker imports at the same moment; then it runs
`trainclock results import --db URL PATH...`.

    python import_worker.py READY_FILE START_FILE URL PATH...
"""

import sys
import time
from pathlib import Path

from trainclock import cli
from trainclock.commands import results

ready_file, start_file, url, *paths = sys.argv[1:]
if results not in cli.COMMANDS:
    cli.COMMANDS = [*cli.COMMANDS, results]
Path(ready_file).touch()
while not Path(start_file).exists():
    time.sleep(0.005)
sys.exit(cli.main(["results", "import", "--db", url, *paths]))
