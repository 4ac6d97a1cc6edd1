"""Reviews whatever path it is given: one log, a benchmark folder of result_*.txt, a system's
folder, or a whole MLPerf result tree (`[vX.Y/]<org>/results/<system>/<benchmark>/result_<i>.txt`
with `<org>/systems/<system>.json`). This is the entry point other packages call:

    from trainclock.review.tree import review_path
    for entry in review_path(Path("results")):
        entry.score_minutes, entry.verdict, [run.minutes for run in entry.runs]
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from trainclock.errors import UsageError
from trainclock.review.entry import EntryContext, EntryReview, review_entry
from trainclock.review.json_files import system_description
from trainclock.review.round_inference import infer_round
from trainclock.review.rulebook import round_has_rules
from trainclock.review.run_review import review_log
from trainclock.review.scoring import supported_rounds

RESULT_LOG = re.compile(r"result_.*\.txt")
# a round folder as the MLCommons repositories name them: vX.Y, or training_results_vX.Y
ROUND_FOLDER = re.compile(r"(?:training_results_)?v(\d+\.\d+)")


def review_path(path: Path, round_: str | None = None, rcp_dir: Path | None = None) -> list[EntryReview]:
    """Every entry under `path`, reviewed and scored. `round_` ("X.Y") overrides the round a
    vX.Y/ (or training_results_vX.Y/) folder in the path names; without either, the logs tell it
    (review/round_inference.py) or the review stops with one line saying it cannot."""
    if round_ is not None:
        check_round(round_, "--round")
    path = Path(path)
    if not path.exists():
        raise UsageError(f"no such file or folder: {path}; give a result log, a benchmark folder or a result tree")
    entries = []
    for folder, logs in find_entries(path):
        context = entry_context(folder, round_, logs)
        entries.append(review_entry(context, [review_log(log, context.round) for log in logs], rcp_dir))
    return entries


def review_logs(logs: list[Path], round_: str | None = None, rcp_dir: Path | None = None) -> EntryReview:
    """One entry made of exactly these logs of one benchmark folder (`trainclock run --runs N`
    scores the runs it made, not older ones beside them), by the same rules as review_path."""
    context = entry_context(logs[0].parent, round_, logs)
    return review_entry(context, [review_log(log, context.round) for log in logs], rcp_dir)


def find_entries(path: Path) -> list[tuple[Path, list[Path]]]:
    """(folder, its result logs in run order) for each folder holding result_*.txt under `path`;
    a file given directly is reviewed alone, whatever its name."""
    if path.is_file():
        return [(path.parent, [path])]
    found = []
    for folder, dirs, files in os.walk(path):
        dirs.sort()
        # only regular files: a FIFO named result_0.txt would block the reading forever
        logs = sorted((f for f in files if RESULT_LOG.fullmatch(f) and _regular(Path(folder) / f)), key=_natural)
        if logs:
            found.append((Path(folder), [Path(folder) / f for f in logs]))
    if not found:
        raise UsageError(f"no result_*.txt logs under {path}; give a result log, a benchmark folder or a result tree")
    return found


def entry_context(folder: Path, round_: str | None = None, logs: list[Path] | None = None) -> EntryContext:
    """Round, org, system and system description from where `folder` sits in a result tree; the
    round from `round_`, else a round folder in the path, else the logs (`logs`, else the folder's)."""
    absolute = folder.resolve()
    round_source = "option" if round_ else "path"
    if round_ is None:
        round_ = _round_from_path(absolute)
        if round_ is None:
            found = logs if logs is not None else _logs_in(folder)
            round_, round_source = infer_round(folder, found), "default"
        else:
            check_round(round_, f"the folder {_round_part(absolute)} in {folder}")
    system_dir = absolute.parent
    if system_dir.parent.name != "results":
        return EntryContext(folder, round_, round_source)
    org_dir = system_dir.parent.parent
    system_path = org_dir / "systems" / f"{system_dir.name}.json"
    desc = system_description(system_path) if system_path.exists() or system_path.is_symlink() else None
    return EntryContext(folder, round_, round_source, org=org_dir.name, system=system_dir.name,
                        benchmark_folder=absolute.name, system_desc=desc,
                        system_path=system_path if desc is not None else None)


def check_round(round_: str, source: str) -> None:
    rounds = supported_rounds()
    if round_ not in rounds or not round_has_rules(round_):
        raise UsageError(f"round {round_!r} ({source}) has no rules in trainclock; it reviews rounds "
                         f"{', '.join(rounds)}: pass --round with one of them")


def _round_from_path(path: Path) -> str | None:
    part = _round_part(path)
    return ROUND_FOLDER.fullmatch(part).group(1) if part else None


def _round_part(path: Path) -> str | None:
    """The innermost part of `path` that names a round (vX.Y, training_results_vX.Y)."""
    return next((part for part in reversed(path.parts) if ROUND_FOLDER.fullmatch(part)), None)


def _logs_in(folder: Path) -> list[Path]:
    try:
        return sorted((p for p in folder.iterdir() if RESULT_LOG.fullmatch(p.name) and _regular(p)),
                      key=lambda p: _natural(p.name))
    except OSError:
        return []


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:  # a dangling link: review_log says what is wrong with it
        return path.is_symlink()


def _natural(name: str) -> list:
    """result_2 before result_10."""
    return [int(piece) if piece.isdigit() else piece for piece in re.split(r"(\d+)", name)]
