"""trainclock's review against the official result summarizer on whole published rounds: per round
the entries, how many trainclock scores identically (the summarizer's score and RCP column), and
every entry that differs, with trainclock's reasons; and both tools' seconds.

  python benchmarks/review_rounds.py [--mirrors /work/.mirror] [--work DIR] [--rounds 4.0 4.1 5.0 5.1]

Each round's results/ and systems/ are extracted from a mirror of mlcommons/training_results_vX.Y
(a bare git directory, `<mirrors>/mlcommons+training_results_vX.Y/repo`) into a read-only tree,
which trainclock reviews (and must leave exactly as it was). The summarizer (the installed
mlperf_logging) runs on a separate throwaway copy, since it rewrites scaling.json where it reads:
system by system as summarize_results computes its detailed columns, in a fresh process per
round. Where its power computation divides by zero (v4.0's smc-*-power entries: a measurement
that starts and stops at the same millisecond), which makes the installed version crash, the
entry's Energy is recorded as that crash and the rest of the round goes on.

Identical: the summarizer's time_to_train (both none, or the same to 6 decimals), its RCP column,
and for a power entry its Energy (the same to 1e-9 relative, or a crash where trainclock says why
it computes none).
trainclock's own score differs from it by policy where it withholds a score (a failed RCP check
without scaling.json): such entries are listed with the reason trainclock prints.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trainclock.review.entry import SCORE_WITHHELD, EntryReview
from trainclock.review.tree import review_path

MIRRORS = Path("/work/.mirror")
ROUNDS = ("4.0", "4.1", "5.0", "5.1")

# run in a fresh process on the throwaway copy: {"<org>/results/<system>/<benchmark>": columns}
OFFICIAL = r"""
import contextlib, io, json, logging, sys
from pathlib import Path
from mlperf_logging.result_summarizer import result_summarizer as rs

tree, ruleset = Path(sys.argv[1]), sys.argv[2]
crashed = set()
compute_total_power = rs._compute_total_power


def total_power_or_nan(folder, *args):  # see the module docstring
    try:
        return compute_total_power(folder, *args)
    except ZeroDivisionError:
        crashed.add(folder)
        return float("nan")


rs._compute_total_power = total_power_or_nan
logging.disable(logging.CRITICAL)  # its RCP checker logs every record it reads
found = {}
for org in sorted(p for p in tree.iterdir() if (p / "results").is_dir()):
    for system in sorted(p for p in (org / "results").iterdir() if p.is_dir()):
        try:
            desc = rs._load_system_desc(str(org), system.name)
        except (json.JSONDecodeError, FileNotFoundError) as e:  # summarize_results skips the system
            for bench in sorted(p for p in system.iterdir() if p.is_dir()):
                found[str(bench.relative_to(tree))] = {"skipped": f"{type(e).__name__}: {e}"}
            continue
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            _, detailed = rs._compute_strong_scaling_scores(desc, str(system), "training", ruleset, desc["division"])
        for bench in sorted(p for p in system.iterdir() if p.is_dir()):
            found[str(bench.relative_to(tree))] = {k.split(":", 1)[1]: v for k, v in detailed.items()
                                                    if k.split(":", 1)[0] == rs._benchmark_alias(bench.name)}
for folder in crashed:
    found[str(Path(folder).relative_to(tree))]["Energy"] = "crashes: ZeroDivisionError"
json.dump(found, sys.stdout)
"""


def extract(mirror: Path, into: Path) -> Path:
    """The round's <org>/results and <org>/systems from the mirror's newest commit, read-only. A
    blob the mirror lacks (it may hold large files as names only) is reported and left out."""
    git = ["git", f"--git-dir={mirror}"]
    listing = subprocess.run([*git, "ls-tree", "-r", "-z", "HEAD"], check=True, capture_output=True).stdout
    files = []
    for line in listing.split(b"\0"):
        if not line:
            continue
        meta, path = line.split(b"\t", 1)
        mode, kind, sha = meta.split()
        parts = path.decode().split("/")
        if kind == b"blob" and mode != b"120000" and len(parts) > 2 and parts[1] in ("results", "systems"):
            files.append((sha.decode(), path.decode()))
    batch = subprocess.run([*git, "cat-file", "--batch"], input="".join(f"{sha}\n" for sha, _ in files).encode(),
                           check=True, capture_output=True).stdout
    at, missing = 0, []
    for sha, path in files:
        header_end = batch.index(b"\n", at)
        header = batch[at:header_end].split()
        at = header_end + 1
        if header[-1] == b"missing":
            missing.append(path)
            continue
        size = int(header[2])
        target = into / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(batch[at:at + size])
        at += size + 1
    if missing:
        print(f"    {mirror}: {len(missing)} files absent from the mirror, left out: {', '.join(missing[:5])}",
              flush=True)
    for path in [into, *into.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    return into


def snapshot(tree: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in tree.rglob("*")}


def writable_copy(tree: Path, into: Path) -> Path:
    shutil.copytree(tree, into)
    for path in [into, *into.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return into


def official_columns(tree: Path, round_: str) -> tuple[dict[str, dict], float]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", OFFICIAL, str(tree), f"{round_}.0"], capture_output=True, text=True,
                          cwd=tree.parent)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the summarizer failed on {tree}:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout), seconds


def differences(entry: EntryReview, official: dict) -> list[str]:
    """How trainclock's view of what the summarizer prints differs from what it printed."""
    found = []
    view, theirs = entry.summarizer, official.get("time_to_train")
    ours = None if view is None else view.score
    if (ours is None) != (theirs is None) or (ours is not None and f"{ours:.6f}" != f"{theirs:.6f}"):
        found.append(f"score {_shown(ours)} vs official {_shown(theirs)}")
    rcp_ours = entry.rcp.official if entry.rcp else None
    if rcp_ours != (official.get("RCP") or None):
        found.append(f"RCP column {rcp_ours} vs official {official.get('RCP')}")
    energy = None if view is None or view.energy is None else view.energy
    theirs_energy = official.get("Energy")
    if isinstance(theirs_energy, str):  # the summarizer crashed on it
        if energy is None or energy.joules is not None:
            found.append(f"the summarizer's energy {theirs_energy}, trainclock's {energy}")
    elif (energy is None) != (theirs_energy is None) or (
            energy is not None and not math.isclose(energy.joules or math.nan, theirs_energy, rel_tol=1e-9)):
        found.append(f"energy {energy} vs official {theirs_energy}")
    if "skipped" in official:
        found.append(f"the summarizer skips its system ({official['skipped']})")
    return found


def _shown(score: float | None) -> str:
    return "none" if score is None else f"{score:.6f}"


def review_round(mirror: Path, work: Path, round_: str) -> dict:
    tree = extract(mirror, work / "read-only" / f"training_results_v{round_}")
    before = snapshot(tree)
    started = time.perf_counter()
    entries = review_path(tree)
    ours_seconds = time.perf_counter() - started
    if snapshot(tree) != before:
        raise SystemExit(f"trainclock changed {tree}")
    copy = writable_copy(tree, work / "throwaway" / tree.name)
    theirs, theirs_seconds = official_columns(copy, round_)
    shutil.rmtree(copy)
    ours = {str(e.context.folder.relative_to(tree)): e for e in entries}
    power = sorted(name for name in ours if (tree / name / "power").is_dir())
    rows = {"round": round_, "entries": len(ours), "identical": 0, "differ": [], "withheld": [],
            "only_trainclock": sorted(set(ours) - set(theirs)), "only_official": sorted(set(theirs) - set(ours)),
            "power": power, "trainclock_s": ours_seconds, "official_s": theirs_seconds,
            "logs": sum(len(e.runs) for e in entries), "by_benchmark": {}}
    for name, entry in sorted(ours.items()):
        if name not in theirs:
            continue
        found = differences(entry, theirs[name])
        counts = rows["by_benchmark"].setdefault(entry.name, [0, 0])
        counts[0] += 1
        if found:
            rows["differ"].append(f"{name}: {'; '.join(found)}; trainclock: {entry.verdict}, "
                                  f"{' | '.join(entry.reasons[:3]) or 'no reason printed'}")
        else:
            rows["identical"] += 1
            counts[1] += 1
        if entry.score_minutes != entry.summarizer_score:
            why = next((r for r in entry.reasons if r.startswith(SCORE_WITHHELD)), None) or " | ".join(entry.reasons)
            rows["withheld"].append(f"{name}: trainclock {_shown(entry.score_minutes)}, summarizer "
                                    f"{_shown(entry.summarizer_score)} ({entry.verdict}: {why})")
    return rows


def print_round(rows: dict) -> None:
    r = rows
    print(f"| v{r['round']} | {r['entries']} | {r['identical']} | {len(r['differ'])} | {len(r['withheld'])} "
          f"| {r['trainclock_s']:.1f} s | {r['official_s']:.1f} s | {r['official_s'] / r['trainclock_s']:.1f}x |",
          flush=True)
    partial = {b: f"{n[1]}/{n[0]}" for b, n in sorted(r["by_benchmark"].items()) if n[0] != n[1]}
    for label, items in (("not identical", r["differ"]),
                         ("score differs from the summarizer's by policy", r["withheld"]),
                         ("reviewed by trainclock only", r["only_trainclock"]),
                         ("scored by the summarizer only", r["only_official"]),
                         ("with a power folder (energy compared)", r["power"])):
        for item in items:
            print(f"    {label}: {item}")
    if partial:
        print(f"    identical per benchmark, where not all: {partial}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", type=Path, default=MIRRORS, help="where the fetched mirrors are (%(default)s)")
    parser.add_argument("--work", type=Path, help="an empty folder for the extracted trees (default: a temporary one)")
    parser.add_argument("--rounds", nargs="+", default=list(ROUNDS), help="rounds to compare (%(default)s)")
    parser.add_argument("--json", type=Path, help="also write every round's figures to this file")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="review-rounds-"))
    print("| round | entries | identical | not identical | score withheld | trainclock | summarizer | ratio |")
    print("|---|---|---|---|---|---|---|---|", flush=True)
    found = []
    for round_ in args.rounds:
        mirror = args.mirrors / f"mlcommons+training_results_v{round_}" / "repo"
        if not mirror.is_dir():
            print(f"| v{round_} | no mirror at {mirror}: fetch github:mlcommons/training_results_v{round_} |")
            continue
        found.append(review_round(mirror, work, round_))
        print_round(found[-1])
        if args.json:
            args.json.write_text(json.dumps(found, indent=1))
    if not args.work:
        for path in work.rglob("*"):
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
