"""The official scores the fixtures' READMEs publish, read from their Markdown tables so that a new
fixture is tested by adding a row: every table with an "official score (minutes)" column."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SCORE_COLUMN = "official score (minutes)"
ROUND = re.compile(r"v\d+\.\d+")
# "scaling.json 1.0042232" in a row's notes: the factor the committee committed with the entry
SCALING = re.compile(r"scaling\.json\s+([0-9.]+)")
OLYMPIC = re.compile(r"olympic mean\s+([0-9.]+)")


@dataclass(frozen=True)
class Row:
    readme: Path
    text: str  # the entry cell as written
    folder: Path  # <root>/<round>/<org>/results/<system>/<benchmark>
    score: str  # as published, six decimals
    runs: int | None  # where the runs column gives a count
    run_minutes: tuple[str, ...]  # where the runs column lists each run's minutes
    notes: str

    @property
    def id(self) -> str:
        root = self.readme.parent
        parts = self.folder.relative_to(root).parts
        return f"{root.name}/{parts[0]}/{parts[1]}/{parts[3]}/{parts[4]}"

    @property
    def committed_scaling(self) -> str | None:
        """The scaling.json factor the notes name, as written."""
        found = SCALING.search(self.notes)
        return found.group(1) if found else None

    @property
    def olympic_mean(self) -> str | None:
        found = OLYMPIC.search(self.notes)
        return found.group(1) if found else None


def official_rows(readme: Path) -> list[Row]:
    """Every row of every table of `readme` that has an official-score column."""
    rows: list[Row] = []
    header: list[str] | None = None
    for line in readme.read_text().splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            continue
        if set("".join(cells)) <= set("-: ") or SCORE_COLUMN not in header:
            continue
        row = dict(zip(header, cells))
        runs = row.get("runs") or row.get("runs (minutes)") or ""
        counted = re.fullmatch(r"(\d+)(?: runs)?", runs)
        listed = tuple(m.strip() for m in runs.split(",")) if "," in runs else ()
        rows.append(Row(readme, row["entry"], _folder(readme.parent, row["entry"]), row[SCORE_COLUMN],
                        int(counted.group(1)) if counted else None, listed, row.get("notes", "") + " " + row["entry"]))
    return rows


def _folder(root: Path, entry: str) -> Path:
    """'v3.1 NVIDIA eos_n8 bert (8 H100), 10 runs, ...' or 'Dell XE9680 ssd (RetinaNet)': the words
    before the first parenthesis or comma are [round] org system benchmark."""
    words = re.split(r"[(,]", entry, maxsplit=1)[0].split()
    round_ = words.pop(0) if words and ROUND.fullmatch(words[0]) else "v*"
    if len(words) != 3:
        raise ValueError(f"{root / 'README.md'}: cannot read '[round] org system benchmark' from {entry!r}")
    org, system, benchmark = words
    found = sorted(root.glob(f"{round_}/{org}/results/{system}/{benchmark}"))
    if len(found) != 1:
        raise ValueError(f"{root / 'README.md'}: {entry!r} names {len(found)} folders under {root}, not one")
    return found[0]
