"""Writes README.md's benchmark tables from the workload registry, so they cannot drift from the code.

Each table sits between two marker comments naming the MLPerf keys of the workloads it lists (one
or several: ssd and maskrcnn share a table):

    <!-- tables:begin ssd maskrcnn -->
    | member | parameters | target | where the target comes from | run |
    ...
    <!-- tables:end ssd maskrcnn -->

A row per member, smallest first, as `trainclock list` has them: its parameter count and shape
(Member.parameters, Member.description), its quality target (metric, direction, threshold), where
the target comes from (Member.target_source, with its evidence file,
src/trainclock/workloads/<package>/targets/<member>.json, where there is one) and the command that
runs it. Everything outside the markers is prose the script never touches: notes the registry
cannot give go there.

  python scripts/readme_tables.py            # rewrite the tables in README.md
  python scripts/readme_tables.py --check    # exit 1, one line, where README.md is out of date (CI)
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MARKERS = re.compile(r"^<!-- tables:begin (?P<keys>[\w. -]+?) -->\n(?P<body>.*?)^<!-- tables:end (?P=keys) -->$",
                     re.MULTILINE | re.DOTALL)
HEADER = ("| member | parameters | target | where the target comes from | run |\n"
          "|---|---|---|---|---|\n")

def built_in_workloads() -> dict:
    """MLPerf key -> workload, trainclock's own only (not a user's $TRAINCLOCK_WORKLOADS or plugin)."""
    from trainclock.workload import registry

    return {w.key: w for w in registry.workloads() if type(w).__module__.startswith("trainclock.workloads.")}


def unavailable() -> dict[str, str]:
    from trainclock.workload import registry

    return registry.unavailable()


def count(n: int) -> str:
    if n >= 1e9:
        return f"{n / 1e9:,.1f}B"
    if n >= 1e6:
        return f"{n / 1e6:,.1f}M"
    return f"{n / 1e3:,.1f}K"


def evidence_file(workload, member: str) -> str | None:
    """The member's target evidence, as a path from the repository root, where there is one."""
    import trainclock

    package = importlib.import_module(".".join(type(workload).__module__.split(".")[:3]))
    path = Path(package.__path__[0]) / "targets" / f"{member}.json"
    if not path.is_file():
        return None
    return "src/" + path.relative_to(Path(trainclock.__file__).parent.parent).as_posix()


def seed_ranges(listed: str) -> str:
    """'1,2,3,4,5,7' -> '1-5, 7'."""
    seeds = [int(s) for s in listed.split(",")]
    spans, start = [], seeds[0]
    for previous, seed in zip(seeds, seeds[1:] + [None]):
        if seed != previous + 1:
            spans.append(f"{start}-{previous}" if previous > start + 1 else
                         f"{start}, {previous}" if previous == start + 1 else str(start))
            start = seed
    return ", ".join(spans)


def source_cell(workload, member, evidence: str | None, seen: dict[str, str]) -> str:
    """Where the target comes from: the kind (mlperf, measured, estimated) and how the target was
    fixed (Member.target_note, or the text after the kind in Member.target_source: 'measured: ...'),
    shortened where it repeats the target, and the evidence file."""
    kind, _, text = str(member.target_source).partition(":")
    text = (getattr(member, "target_note", "") or text).strip()
    if kind == "mlperf":
        cell = f"MLPerf {text}"
    elif kind == "measured":
        text = text.removeprefix("reference runs, ")
        text = re.sub(r"seeds (\d+(?:,\d+)*)", lambda m: "seeds " + seed_ranges(m.group(1)), text)
        text = re.sub(r"every seed reaches .*? within", "every seed reaches the target within", text)
        text = text.replace(" in these runs", "")
        cell = f"measured: {text}"
    elif text in seen:
        cell = f"{kind}: as for {seen[text]}"
    else:
        seen[text] = member.name
        cell = f"{kind}: {text}" if text else kind
    if evidence:
        cell += f"; {tier_rule_verdict(workload, member, ROOT / evidence)}" if kind == "measured" else ""
        cell += f"; [{evidence.rsplit('/', 2)[-2]}/{evidence.rsplit('/', 1)[-1]}]({evidence})"
    return cell.replace("|", "\\|")


def tier_rule_verdict(workload, member, evidence: Path) -> str:
    """The tier rule (issue 34) on the member's reference runs: pass or the points it fails, with
    its learning share and the CV of its samples-to-target (benchmarks/tier_rule.py prints all)."""
    import json

    from trainclock.review.rcp import largest_cv
    from trainclock.workload.tier_rule import judge

    runs = json.loads(evidence.read_text()).get("runs") or []
    if not runs:
        return "tier rule: no reference runs recorded"
    points = judge(runs, member.quality, largest_cv(workload.key, f"{workload.mlperf_round}.0"))
    failed = [p.name for p in points if not p.passed]
    figures = {p.name: p.value for p in points if p.value is not None}
    shown = ", ".join(f"{name} {value:.2f}" if name == "learning share" else f"CV {value:.3f}"
                      for name, value in figures.items())
    return f"tier rule {'passes' if not failed else 'fails (' + ', '.join(failed) + ')'}: {shown}"


def run_cell(workload, member) -> str:
    if member.name == workload.full_size:
        flags = getattr(workload, "full_size_flags", "")  # a plugin workload need not declare it
        return f"`trainclock run {workload.key}{' ' + flags if flags else ''}`"
    return f"`trainclock run {member.name}`"


def table(workloads: list) -> str:
    rows, seen = [], {}
    for workload in workloads:
        for member in workload.members():
            shape = f": {member.description}" if member.description else ""
            target = " and ".join(t.describe() for t in member.quality)
            cells = (member.name, count(member.parameters) + shape, target,
                     source_cell(workload, member, evidence_file(workload, member.name), seen), run_cell(workload, member))
            rows.append("| " + " | ".join(c.replace("|", "\\|") if i != 3 else c for i, c in enumerate(cells)) + " |\n")
    return HEADER + "".join(rows)


class OutOfDate(Exception):
    pass


def rewritten(text: str) -> tuple[str, list[str]]:
    """README text with every marked table regenerated, and the keys whose tables changed. Raises
    OutOfDate where a built-in workload has no table or a marker names an unknown key."""
    known, missing_deps = built_in_workloads(), unavailable()
    placed: set[str] = set()
    changed: list[str] = []

    def replace(match: re.Match) -> str:
        keys = match.group("keys").split()
        unknown = [k for k in keys if k not in known and k not in missing_deps]
        if unknown:
            raise OutOfDate(f"README.md has a table for {', '.join(unknown)}, which no built-in workload is")
        placed.update(keys)
        if any(k in missing_deps for k in keys):  # cannot regenerate without its dependency: kept
            print(f"readme_tables: kept the {' '.join(keys)} table as it is: "
                  f"{', '.join(sorted(set(missing_deps.values())))} not installed", file=sys.stderr)
            return match.group(0)
        body = table([known[k] for k in keys])
        if body != match.group("body"):
            changed.append(" ".join(keys))
        return f"<!-- tables:begin {match.group('keys')} -->\n{body}<!-- tables:end {match.group('keys')} -->"

    new = MARKERS.sub(replace, text)
    absent = [k for k in known if k not in placed]
    if absent:
        raise OutOfDate(f"README.md has no table for {', '.join(absent)}: add `<!-- tables:begin KEY -->` and "
                        "`<!-- tables:end KEY -->` lines under ## Benchmarks, then run python scripts/readme_tables.py")
    return new, changed


def main(argv: list[str] | None = None, readme: Path = README) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 where README.md's tables are out of date, changing nothing")
    args = p.parse_args(argv)
    text = readme.read_text()
    try:
        new, changed = rewritten(text)
    except OutOfDate as e:
        print(f"readme_tables: {e}")
        return 1
    if args.check:
        if changed:
            print(f"README.md's benchmark tables are out of date ({', '.join(changed)}): "
                  "run python scripts/readme_tables.py")
            return 1
        return 0
    if new != text:
        readme.write_text(new)
        print(f"rewrote the tables of {', '.join(changed)} in {readme.name}")
    else:
        print(f"{readme.name}'s tables are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
