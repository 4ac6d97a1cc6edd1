"""Damaged checkpoints: every file of a checkpoint truncated, overwritten in the middle or
removed, and log offsets past the files. A resume reports the damage in one line, falls back to
the checkpoint before it, and finishes with the undamaged run's loss curve, bit for bit. With
none intact it says so in one line (exit 2); a run that diverges is aborted with no quality.
Every damage goes through the resume's choice of checkpoint; a representative few (each file
kind, each damage kind) through whole resumed runs, which cost 10-20 s each here.

The interrupted run is made without a kill: a finished run whose log is renamed back to
.partial is a run killed after its last step, before run_stop, with no timing to race (the kill
itself is test_resume's subject). The resumes of a module run side by side (2 cores)."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.distributed.helpers import evals, losses, run, tiny_args

ARGS = ("--gbs", "8", "--micro-batch", "8", "--checkpoint-every", "2")
SAMPLES = 48  # 6 steps: the checkpoints of steps 2 and 4 are kept, the last step saves none
NEWEST, OLDER = "step_00000004", "step_00000002"
FILES_1 = (".metadata", "__0_0.distcp", "rng_rank0.pt", "trainclock.json")
HOWS = ("truncate", "overwrite", "remove")
FILES_2 = (".metadata", "__0_0.distcp", "__1_0.distcp", "rng_rank0.pt", "rng_rank1.pt", "trainclock.json")
EVERY_1 = [f"{name}:{how}" for name in FILES_1 for how in HOWS] + ["offsets-past-the-files", "metrics-cut-short"]
EVERY_2 = [f"{name}:{how}" for name in FILES_2 for how in HOWS]
RUN_1 = ["__0_0.distcp:overwrite", "rng_rank0.pt:truncate", ".metadata:remove", "trainclock.json:overwrite",
         "offsets-past-the-files"]
RUN_2 = ["__1_0.distcp:overwrite", "rng_rank1.pt:truncate"]
NPROC_2 = ("--nproc", "2", "--system", "two")


def damage(file: Path, how: str) -> None:
    if how == "remove":
        file.unlink()
        return
    data = bytearray(file.read_bytes())
    if how == "truncate":
        file.write_bytes(data[: len(data) // 2])
        return
    # 4 KB in the middle (a quarter of a small file), every byte changed: headers stay intact
    n = min(4096, len(data) // 4)
    at = (len(data) - n) // 2
    data[at:at + n] = bytes(b ^ 0xA5 for b in data[at:at + n])
    file.write_bytes(bytes(data))


def folder_of(out: Path, step: str) -> Path:
    return next(out.glob(f"checkpoints/*/gpt3-tiny/result_0/{step}"))


def rewrite_meta(folder: Path, edit) -> None:
    """Edit a checkpoint's trainclock.json and re-seal it as a save would (its files' sha256
    and the meta checksum): damage that checksums cannot see, or a valid checkpoint by hand."""
    meta = json.loads((folder / "trainclock.json").read_text())
    edit(meta)
    meta["files"] = {p.name: {"size": p.stat().st_size, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
                     for p in sorted(folder.iterdir()) if p.name != "trainclock.json"}
    body = {k: v for k, v in meta.items() if k != "checksum"}
    meta["checksum"] = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    (folder / "trainclock.json").write_text(json.dumps(meta, indent=1))


def poison_weights(folder: Path) -> None:
    """NaN in one weight, the checkpoint otherwise whole: a run that diverges after the resume."""
    import torch
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save, torch_save_to_dcp

    whole = folder.parent / "whole.pt"
    dcp_to_torch_save(folder, whole)
    state = torch.load(whole, weights_only=False)
    next(t for t in state["model"].values() if t.is_floating_point()).fill_(math.nan)
    torch.save(state, whole)
    for p in folder.glob("*.distcp"):
        p.unlink()
    (folder / ".metadata").unlink()
    torch_save_to_dcp(whole, folder)
    whole.unlink()
    rewrite_meta(folder, lambda meta: None)


def prepare(case: str, out: Path) -> None:
    newest = folder_of(out, NEWEST)
    if case == "offsets-past-the-files":  # a sealed meta whose offsets a resume would truncate the files to
        rewrite_meta(newest, lambda meta: meta.update(offsets={"log": 99999999, "metrics": -5}))
    elif case == "metrics-cut-short":  # the metrics lost their end: the newest checkpoint's offset is past it
        metrics = next(out.glob("results/*/gpt3-tiny/result_0.metrics.jsonl"))
        with open(metrics, "r+b") as f:
            f.truncate(json.loads((newest / "trainclock.json").read_text())["offsets"]["metrics"] - 1)
    elif case == "all-damaged":
        damage(newest / "__0_0.distcp", "overwrite")
        damage(folder_of(out, OLDER) / "trainclock.json", "remove")
    elif case == "nan-weights":
        poison_weights(newest)
    else:
        name, how = case.split(":")
        damage(newest / name, how)


def interrupted(corpus: Path, out: Path, env: dict, *extra: str):
    """An undamaged run (its curve and evaluations: the reference), then left as if killed."""
    proc = run(tiny_args(corpus, out, *ARGS, *extra, samples=SAMPLES), env=env)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    reference = losses(out), evals(out)
    log = next(out.glob("results/*/gpt3-tiny/result_0.txt"))
    log.rename(log.with_name(log.name + ".partial"))
    return reference


def resume_all(corpus: Path, template: Path, base: Path, cases: list[str], env: dict, *extra: str) -> dict:
    def one(case: str):
        out = base / case.replace(":", "-").lstrip(".")
        shutil.copytree(template, out)
        prepare(case, out)
        return out, run(tiny_args(corpus, out, *ARGS, *extra, "--resume", samples=SAMPLES), env=env)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(cases, pool.map(one, cases)))


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> dict:
    """One data home for the module: the corpus is tokenised once, runs go into its own store."""
    return {"TRAINCLOCK_HOME": str(tmp_path_factory.mktemp("home"))}


@pytest.fixture(scope="module")
def template_1(corpus_dir, tmp_path_factory, home):
    template = tmp_path_factory.mktemp("one-process")
    return template, interrupted(corpus_dir, template, home)


@pytest.fixture(scope="module")
def template_2(corpus_dir, tmp_path_factory, home):
    template = tmp_path_factory.mktemp("two-processes")
    return template, interrupted(corpus_dir, template, home, *NPROC_2)


@pytest.fixture(scope="module")
def one_process(corpus_dir, tmp_path_factory, home, template_1):
    template, reference = template_1
    cases = [*RUN_1, "all-damaged", "nan-weights"]
    return reference, resume_all(corpus_dir, template, tmp_path_factory.mktemp("resumed-1"), cases, home)


@pytest.fixture(scope="module")
def two_processes(corpus_dir, tmp_path_factory, home, template_2):
    template, reference = template_2
    return reference, resume_all(corpus_dir, template, tmp_path_factory.mktemp("resumed-2"), RUN_2, home, *NPROC_2)


def choice_after(template: Path, case: str, tmp_path: Path):
    """What a resume would pick after `case`'s damage: the same decision the run makes, on rank 0."""
    from trainclock.train.run import _resumable

    out = tmp_path / "out"
    shutil.copytree(template, out, ignore=shutil.ignore_patterns("systems"))
    prepare(case, out)
    results = next(out.glob("results/*/gpt3-tiny"))
    return _resumable(out, results)


def assert_chose_the_older(slot) -> None:
    assert slot is not None and slot.error is None, slot
    assert slot.resume_from.name == OLDER
    assert [(p.name, bool(why)) for p, why in slot.skipped] == [(NEWEST, True)]


@pytest.mark.parametrize("case", EVERY_1)
def test_every_damage_of_a_checkpoint_is_found(template_1, case, tmp_path):
    assert_chose_the_older(choice_after(template_1[0], case, tmp_path))


@pytest.mark.slow
def test_every_damage_of_a_two_process_checkpoint_is_found(template_2, tmp_path):
    for i, case in enumerate(EVERY_2):
        assert_chose_the_older(choice_after(template_2[0], case, tmp_path / str(i)))


def assert_fell_back(reference, out: Path, proc) -> None:
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    reports = [line for line in proc.stderr.splitlines() if "is damaged" in line]
    assert len(reports) == 1, proc.stderr[-3000:]
    assert reports[0].startswith("trainclock: checkpoint ") and f"{NEWEST} is damaged (" in reports[0]
    assert reports[0].endswith(f"): skipped; resuming from {OLDER}")
    reference_losses, reference_evals = reference
    assert losses(out) == reference_losses  # bit for bit, from the older checkpoint on
    assert evals(out) == reference_evals
    log = next(out.glob("results/*/gpt3-tiny/result_0.txt"))
    assert log.stat().st_size < 1_000_000  # no file padded out to a bogus offset
    text = log.read_text()
    assert text.count('"key": "run_start"') == 1 and text.count('"key": "run_stop"') == 1
    assert f'{OLDER}", "restart_count"' in text  # trainclock_resumed names the checkpoint it loaded


@pytest.mark.parametrize("case", RUN_1)
def test_a_damaged_checkpoint_is_reported_and_skipped(one_process, case):
    reference, resumed = one_process
    out, proc = resumed[case]
    assert_fell_back(reference, out, proc)
    if case == "offsets-past-the-files":
        assert "log offset 99999999 is past the end of result_0.txt.partial" in proc.stderr


def test_with_every_checkpoint_damaged_resume_says_what_to_do(one_process):
    _, resumed = one_process
    _, proc = resumed["all-damaged"]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith("trainclock: error: every checkpoint of result_0 in ")
    assert f"{NEWEST}: __0_0.distcp fails its sha256 check; {OLDER}: trainclock.json is missing" in lines[0]
    assert "start a new run without --resume" in lines[0]


def test_a_run_that_diverges_after_a_resume_is_aborted_with_no_quality(one_process):
    _, resumed = one_process
    out, proc = resumed["nan-weights"]
    assert proc.returncode == 1, proc.stderr[-3000:]  # aborted: stopped, not at the target
    assert "is damaged" not in proc.stderr  # a whole checkpoint of a bad model: nothing to skip
    assert "run aborted" in proc.stdout and "quality nan" not in proc.stdout.replace("│", "").replace("  ", " ")
    assert "none: the run diverged" in proc.stdout
    text = next(out.glob("results/*/gpt3-tiny/result_0.txt")).read_text()
    assert '"key": "trainclock_diverged"' in text and '"status": "aborted"' in text
    assert "NaN" not in text.split('"key": "trainclock_resumed"')[1].split('"key": "trainclock_diverged"')[0]


@pytest.mark.slow
@pytest.mark.parametrize("case", RUN_2)
def test_two_processes_agree_on_the_checkpoint_to_fall_back_to(two_processes, case):
    reference, resumed = two_processes
    out, proc = resumed[case]
    assert_fell_back(reference, out, proc)


def test_the_summary_of_a_diverged_run_reports_no_quality():
    from rich.console import Console

    from trainclock.train.loop import TrainOutcome
    from trainclock.train.run import RunResult
    from trainclock.train.summary import print_run_summary
    from trainclock.workload.base import QualityTarget

    target = QualityTarget(metric="log_perplexity", threshold=4.9, direction="lower")
    for evals_, final_loss, diverged in (([], math.nan, True), ([(64, {"log_perplexity": 5.2})], math.nan, True),
                                         ([(64, {"log_perplexity": math.nan})], 5.0, True), ([], 6.0, False)):
        outcome = TrainOutcome("aborted", 8, 64, 8192, 1.0, evals_, final_loss, diverged)
        result = RunResult(Path("r.txt"), Path("m.jsonl"), Path("s.json"), outcome, 1000, "tokens", 1.0, (target,),
                           5, 0.0, 1.0, 1)
        console = Console(record=True, width=200)
        print_run_summary(result, console)
        text = console.export_text()
        assert "nan" not in text.lower() and "5.2000" not in text
        assert ("none: the run diverged" if diverged else "none: no evaluation ran") in text
