"""`trainclock run BENCHMARK`: train to the quality target, log in MLPerf format; `--runs N`
makes a whole entry and prints its official score."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
import tempfile
import threading
from pathlib import Path

from trainclock.commands import args as checks
from trainclock.distributed.layout import PP_SCHEDULES
from trainclock.errors import UsageError

STATUS_FILE_ENV = "TRAINCLOCK_STATUS_FILE"  # where rank 0 tells the launching process how the run ended
# Exit codes: 0 target reached, 1 stopped at a limit (aborted), 2 bad input, 3 a process failed
PROCESS_FAILED = 3
MAX_RUNS = 100
# a system name is one folder name under results/ and a file name under systems/
SYSTEM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")
NAME = "run"
WORKLOAD_FLAGS = "the benchmark's own flags"  # the argument group a workload's add_arguments fills


def register(sub) -> None:
    run = sub.add_parser("run", help="train a benchmark to its quality target and log it in MLPerf format")
    run.add_argument("benchmark", help="a member (<benchmark>-<size>) or an MLPerf key for the full size (see `trainclock list`)")
    run.add_argument("--data", help="the benchmark's data source (default: its own; what each benchmark reads: the README)")
    run.add_argument("--seed", type=int, help="random seed (default: a fresh one, logged; with --runs, seed, seed+1, ...)")
    run.add_argument("--runs", type=int, default=1, help="make N runs (an MLPerf entry) and print the entry's score (default: 1)")
    run.add_argument("--out", type=Path, default=Path("trainclock-results"), help="result tree root (default: %(default)s)")
    run.add_argument("--gbs", type=int, help="global batch size in samples (default: the spec's)")
    run.add_argument("--micro-batch", type=int, help="samples per forward/backward (default: the spec's)")
    run.add_argument("--precision", choices=["auto", "bf16", "fp32"],
                     help="bf16 autocast or fp32; auto (default): bf16 where the device multiplies bf16 faster, "
                          "measured at init (a CPU without bf16 instructions trains in fp32)")
    run.add_argument("--compile", action="store_true", default=None, help="torch.compile the model (compiled during init, untimed)")
    run.add_argument("--activation-checkpointing", action="store_true", default=None,
                     help="recompute each block's activations in backward (less memory, about 1/3 more compute)")
    run.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)")
    run.add_argument("--max-minutes", type=float, help="stop as aborted after this much training time")
    run.add_argument("--max-samples", type=int, help="stop as aborted after this many samples")
    run.add_argument("--profile", type=int, default=0, metavar="STEPS",
                     help="torch.profiler over STEPS training steps after 2: a Chrome trace beside the log and where "
                          "the step's time went (the run's times then include the profiler's cost)")
    run.add_argument("--org", default="trainclock", help="submission_org in the log")
    run.add_argument("--status", default="onprem", choices=["onprem", "cloud", "preview", "research"])
    run.add_argument("--system", help="system name (default: <host>_<device>x<count>)")
    run.add_argument("--no-progress", action="store_true", help="no live progress bar")
    run.add_argument("--db", help="results database the finished run is imported into (default: SQLite in the data dir)")
    dist = run.add_argument_group("distributed (torchrun: gloo on CPU, NCCL on GPU)")
    dist.add_argument("--nproc", "--nproc-per-node", dest="nproc", type=int, default=1,
                      help="processes per node (default: 1, a plain process)")
    dist.add_argument("--nnodes", type=int, default=1, help="nodes (default: 1)")
    dist.add_argument("--node-rank", type=int, default=0, help="this node's rank, 0..nnodes-1")
    dist.add_argument("--rdzv", help="HOST:PORT of the rendezvous on node 0 (multi-node runs)")
    dist.add_argument("--run-id", help="the same id on every node of a multi-node run (default: SLURM_JOB_ID or random)")
    dist.add_argument("--max-restarts", type=int, default=0, help="restart a failed worker group up to K times, resuming from the last checkpoint")
    dist.add_argument("--tp", type=int, default=1, help="tensor-parallel degree")
    dist.add_argument("--pp", type=int, default=1, help="pipeline-parallel degree")
    dist.add_argument("--pp-schedule", choices=PP_SCHEDULES,
                      help="how micro-batches move through the pipeline (default: 1f1b; interleaved-1f1b with --vp > 1)")
    dist.add_argument("--vp", type=int, help="pipeline stages per pipeline rank (interleaved-1f1b; default 2 there)")
    dist.add_argument("--dp", type=int, help="data-parallel degree (default: processes / (tp x pp))")
    dist.add_argument("--fsdp", action="store_true", help="shard the data-parallel dimension with FSDP2 (default: DDP)")
    dry = run.add_argument_group("dry run (one process as rank 0 of the whole job, on a fake process group)")
    dry.add_argument("--dry-run", action="store_true",
                     help="build the model and optimizer state at the layout on the meta device and print rank 0's "
                          "memory beside the planner's and the accelerator's; trains and writes nothing (exit 1: it does not fit)")
    dry.add_argument("--accelerator", help="with --dry-run: the catalogue accelerator it must fit (default: h100-sxm)")
    dry.add_argument("--hardware", type=Path, action="append", default=[], metavar="FILE",
                     help="with --dry-run: TOML file of more accelerators (as `trainclock plan --hardware`)")
    ckpt = run.add_argument_group("checkpoints")
    ckpt.add_argument("--checkpoint-every", type=int, help="save a sharded checkpoint every N steps (default: off; at each evaluation with --max-restarts)")
    ckpt.add_argument("--resume", action="store_true",
                      help="continue the newest unfinished run from its last complete checkpoint, with its seed and settings")
    run.set_defaults(func=main)


def extend(parser, argv: list[str]) -> None:
    """Add the named benchmark's own flags (e.g. a start checkpoint) to `run`'s parser; an
    unknown name is left for main() to report."""
    from trainclock.errors import TrainclockError
    from trainclock.workload import registry

    name = next((a for a in argv if not a.startswith("-")), None)
    if name is None:
        return
    try:
        workload, _ = registry.find(name)
    except TrainclockError:
        return
    group = parser.add_argument_group(WORKLOAD_FLAGS)
    workload.add_arguments(group)
    actions = group._group_actions
    # a resume takes over the flags that change what the run trains (the workload's resumed_flags):
    # it must know each one's name and default
    resumed = [action for action in actions if action.dest in getattr(workload, "resumed_flags", ())]
    parser.set_defaults(workload_flags=tuple(action.dest for action in actions),
                        workload_flag_names={action.dest: action.option_strings[0] for action in resumed},
                        workload_flag_defaults={action.dest: action.default for action in resumed})


def _workload_flags(args) -> dict:
    """The values of the flags the benchmark added, for RunSettings.extra."""
    return {dest: getattr(args, dest) for dest in getattr(args, "workload_flags", ())}


def main(args) -> int:
    """The command; SIGTERM (how batch schedulers stop a job) ends a run as Ctrl-C does."""
    with _sigterm_as_interrupt():
        return _main(args)


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """While the command runs, SIGTERM raises KeyboardInterrupt in the main thread: the run closes
    its log (aborted, or kept for --resume), and the process exits 130 with one line."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def check_names(args) -> None:
    """--system names a folder under --out (and a file under systems/): one safe path component;
    --data, when given, names something."""
    name = args.system
    if name is not None and not SYSTEM_NAME.fullmatch(name):
        shown = name if len(name) <= 60 else name[:60] + "..."
        raise UsageError(f"--system {shown!r} is not a system name; use one name of letters, digits, '.', '_', "
                         "'+' and '-' (no '/', not starting with '.' or '-', at most 128 characters)")
    if args.data is not None and not args.data.strip():
        raise UsageError("--data is empty; give the data source, or leave --data out for the benchmark's own")


def _main(args) -> int:
    from trainclock.distributed import env as dist_env
    from trainclock.distributed.layout import Layout
    from trainclock.workload import registry

    workload, member = registry.find(args.benchmark)
    for flag in ("max_minutes", "max_samples", "checkpoint_every", "nproc", "nnodes", "micro_batch"):
        checks.positive("--" + flag.replace("_", "-"), getattr(args, flag))
    checks.at_most("--nproc", args.nproc, checks.MAX_PROCS_PER_NODE)
    checks.at_most("--nnodes", args.nnodes, checks.MAX_NODES)
    check_names(args)
    checks.not_negative("--max-restarts", args.max_restarts)
    checks.not_negative("--profile", args.profile)
    if not 0 <= args.node_rank < args.nnodes:
        raise UsageError(f"--node-rank {args.node_rank} must be 0 to --nnodes - 1 = {args.nnodes - 1}")
    checks.seed(args.seed)
    if args.runs > 1 and args.seed is not None:
        checks.seed(args.seed + args.runs - 1)
    if not 1 <= args.runs <= MAX_RUNS:
        raise UsageError(f"--runs {args.runs} is out of range; an entry takes 1 to {MAX_RUNS} runs")
    if args.runs > 1 and args.resume:
        raise UsageError("--resume continues one run; drop --runs (or resume first, then make the other runs)")
    device = checks.device(args.device)
    _check_store(args.db)
    world = args.nproc * args.nnodes
    layout = Layout.for_world(world, tp=args.tp, pp=args.pp, dp=args.dp, fsdp=args.fsdp,
                              pp_schedule=args.pp_schedule, vp=args.vp)
    if args.dry_run:
        return _dry_run(args, workload, member, layout)
    if args.accelerator or args.hardware:
        raise UsageError("--accelerator and --hardware size a --dry-run; a run trains on the --device it has")
    if args.resume:
        _take_over_resumed_settings(args, member, device, world)
    settings = _settings(args)
    spec = workload.resolve(member, settings, layout, device)

    if world > 1 and not dist_env.under_torchrun():
        return _launch_all(args, spec.name, layout, world)
    env = dist_env.current()
    if env.world_size != world:
        raise UsageError(f"torchrun started {env.world_size} processes but --nproc x --nnodes is {world}")
    if args.runs == 1:
        return _run_once(args, workload, spec, settings, layout, device, args.seed)
    codes, logs = [], []
    for i in range(args.runs):
        print(f"trainclock: run {i + 1} of {args.runs}")
        try:
            code, log = _run_once(args, workload, spec, settings, layout, device,
                                  None if args.seed is None else args.seed + i, want_log=True)
        except KeyboardInterrupt:
            if env.is_main:
                _score_interrupted_entry(logs, args.runs)
            raise
        codes.append(code)
        logs.append(log)
    return _score_entry(logs, codes)


def _dry_run(args, workload, member: str, layout) -> int:
    """Rank 0 of the whole job on the fake backend (distributed.dry_run): its memory, measured on
    fake tensors, beside the planner's memory model and the accelerator's capacity."""
    from dataclasses import replace

    import torch

    from trainclock.distributed import dry_run
    from trainclock.planner.model import hardware
    from trainclock.planner.model.memory import RUNTIME_RESERVE, memory_per_accelerator
    from trainclock.planner.model.parallel_plan import Plan

    if args.resume or args.runs > 1 or args.node_rank or args.rdzv:
        raise UsageError("--dry-run stands in for rank 0 of the whole job once and trains nothing: "
                         "drop --resume, --runs, --node-rank and --rdzv")
    if args.compile:
        raise UsageError("--dry-run measures the model as it runs uncompiled; drop --compile")
    accelerator = hardware.find(hardware.load_catalogue(args.hardware), args.accelerator or "h100-sxm")
    precision = args.precision or "auto"
    if precision == "auto":
        precision = "bf16" if "bf16" in accelerator.peak_flops else "fp32"
    layout = replace(layout, precision=precision)
    missing = [hook for hook in ("build_model", "optimizer", "sample_loss") if not hasattr(workload, hook)]
    if missing:
        raise UsageError(f"{member} has no dry run yet: workloads/{workload.key} lacks the model hook "
                         f"({', '.join(missing)}) the dry run builds the model with")
    settings = _settings(args)
    meta = torch.device("meta")
    spec = workload.resolve(member, settings, layout, meta)
    rows = min(spec.micro_batch_size, spec.global_batch_size // layout.dp)  # a rank's micro-batch
    microbatches = spec.global_batch_size // layout.dp // rows
    memory = dry_run.run(layout, lambda ctx: workload.build_model(spec, ctx, meta, settings),
                         workload.optimizer(spec).build,
                         lambda model: workload.sample_loss(spec, model, rows, dry_run.FAKE_DEVICE), microbatches,
                         torch.bfloat16 if precision == "bf16" else None)
    cost = workload.cost(member)
    estimate = None
    if cost is not None:
        plan = Plan(layout=layout, micro_batch=rows, sequence_parallel=False,
                    recompute="full" if settings.activation_checkpointing else "none",
                    zero=3 if layout.fsdp else 0, precision=precision)
        figures = memory_per_accelerator(cost, spec.global_batch_size, plan, accelerator)
        estimate = dry_run.Estimate(figures.weights, figures.gradients, figures.optimizer, figures.activations,
                                    figures.logits)
    usable = accelerator.memory_bytes * (1 - RUNTIME_RESERVE)
    lines, verdict = dry_run.table(memory, estimate, usable)
    nodes = f" ({args.nnodes} nodes x {args.nproc})" if args.nnodes > 1 else ""
    print(f"trainclock: {spec.name} dry run as rank 0 of {layout.world_size:,} processes{nodes}: {layout.describe()}, "
          f"{precision}, micro-batch {rows} x {microbatches} per step"
          f"{', activation checkpointing' if settings.activation_checkpointing else ''}")
    unmeasured = "; activations from the planner (its forward reads values fake tensors do not have)"
    print("trainclock: on a fake process group, the model built on the meta device and rank 0's shards made as "
          "fake tensors: nothing allocated" + ("" if memory.activations is not None else unmeasured))
    print("\n".join(lines))
    print(f"device: {accelerator.name} ({accelerator.id}), {accelerator.memory_bytes / 1e9:,.0f} GB, "
          f"{usable / 1e9:,.2f} GB usable (the planner keeps {RUNTIME_RESERVE:.0%} for the runtime)")
    if verdict.fits:
        print(f"fits: yes, {verdict.total / 1e9:,.2f} GB of {usable / 1e9:,.2f} GB usable")
        return 0
    print(f"fits: no, {verdict.total / 1e9:,.2f} GB > {usable / 1e9:,.2f} GB usable; the largest share is {verdict.largest}")
    return 1


def _check_store(db: str | None) -> None:
    """A --db that could never keep the run is refused before the training, not after it."""
    from trainclock.results.db import check_url

    check_url(db)


def _settings(args):
    from trainclock.workload.base import RunSettings

    return RunSettings(data=args.data, global_batch_size=args.gbs, micro_batch_size=args.micro_batch,
                       compile=bool(args.compile), activation_checkpointing=bool(args.activation_checkpointing),
                       extra=_workload_flags(args))


def _take_over_resumed_settings(args, member: str, device, world: int) -> None:
    """A resume continues the checkpoint's run: its seed and the settings it was started with,
    unless the user passes them; an explicit value that differs is refused."""
    from trainclock.device import system
    from trainclock.train.run import resumable_settings

    system_name = args.system or system.default_system_name(device, per_node=world)
    stored = resumable_settings(args.out, system_name, member)
    if stored is None:
        return  # the run reports that there is nothing to resume, with the systems that have something
    flags = {"seed": "--seed", "data": "--data", "global_batch_size": "--gbs", "micro_batch_size": "--micro-batch",
             "compile": "--compile", "activation_checkpointing": "--activation-checkpointing", "precision": "--precision"}
    attrs = {"global_batch_size": "gbs", "micro_batch_size": "micro_batch"}
    for key, flag in flags.items():
        attr = attrs.get(key, key)
        given, recorded = getattr(args, attr), stored.get(key)
        if given is None:
            setattr(args, attr, recorded)
        elif recorded is not None and given != recorded and not (key == "precision" and given == "auto"):
            raise UsageError(f"{flag} {given} differs from the run being resumed ({flag} {recorded}); "
                             f"drop {flag} to continue that run, or start a new run without --resume")
    names, defaults = getattr(args, "workload_flag_names", {}), getattr(args, "workload_flag_defaults", {})
    for dest, recorded in stored.get("workload_flags", {}).items():  # the benchmark's own flags (e.g. --fp8)
        if dest not in names:
            continue  # a layout flag (it may change with the world size), or one this version no longer has
        given = getattr(args, dest)
        if given == defaults[dest]:
            setattr(args, dest, recorded)
        elif given != recorded:
            flag = names[dest]
            raise UsageError(f"{flag} {given} differs from the run being resumed ({flag} {recorded}); "
                             f"drop {flag} to continue that run, or start a new run without --resume")


def _launch_all(args, name: str, layout, world: int) -> int:
    """Each run of several processes re-executes `trainclock run` under torchrun; with --runs,
    once per run, and the entry is scored here from the logs the runs name."""
    from trainclock.distributed.launch import run_under_torchrun, torchrun_command

    child = [*args.argv, "--runs", "1"]
    if args.resume:  # the resumed run's seed and settings, taken over above, go to every rank
        child += [part for flag, value in (("--data", args.data), ("--gbs", args.gbs),
                                           ("--micro-batch", args.micro_batch), ("--precision", args.precision))
                  if value is not None for part in (flag, str(value))]
    run_id = args.run_id or os.environ.get("SLURM_JOB_ID")
    print(f"trainclock: {name} on {world} processes ({layout.describe()}), via torchrun")
    codes, logs = [], []
    for i in range(args.runs):
        seed = [] if args.seed is None else ["--seed", str(args.seed + i)]
        with tempfile.TemporaryDirectory() as tmp:
            status_file = Path(tmp) / "status"
            code = run_under_torchrun(torchrun_command([*child, *seed], args.nproc, args.nnodes, args.node_rank, args.rdzv,
                                                       args.max_restarts, run_id), {STATUS_FILE_ENV: str(status_file)})
            status, _, log = (status_file.read_text() if status_file.exists() else "").partition("\n")
        if code == 130:  # torchrun interrupted (Ctrl-C or SIGTERM): the runs finished are scored
            if args.runs > 1 and args.node_rank == 0:
                _score_interrupted_entry(logs, args.runs)
            raise KeyboardInterrupt
        if code:
            print(f"trainclock: error: the distributed run failed (torchrun exit code {code}); the failing ranks are named above",
                  file=sys.stderr)
            return PROCESS_FAILED
        codes.append(0 if status == "success" else 1)
        logs.append(Path(log) if log else None)
    if args.runs == 1 or args.node_rank != 0:
        return codes[0] if args.runs == 1 else 0
    return _score_entry(logs, codes)


def _run_once(args, workload, spec, settings, layout, device, seed: int | None, want_log: bool = False):
    from trainclock.distributed import env as dist_env
    from trainclock.train.options import TrainOptions
    from trainclock.train.run import RunRequest, execute
    from trainclock.train.summary import print_run_summary

    env = dist_env.current()
    options = TrainOptions(
        device=device,
        precision=args.precision or "auto",
        max_seconds=args.max_minutes * 60 if args.max_minutes else None,
        max_samples=args.max_samples,
        profile_steps=args.profile,
        checkpoint_every_steps=args.checkpoint_every or (max(spec.eval_every_samples // spec.global_batch_size, 1)
                                                        if args.max_restarts else 0),
    )
    request = RunRequest(workload=workload, spec=spec, settings=settings, out=args.out, seed=seed, options=options,
                         layout=layout, org=args.org, status=args.status, system_name=args.system,
                         progress=not args.no_progress, resume=args.resume)
    if env.is_main:
        from trainclock.workload import registry

        targets = "; ".join(t.describe() for t in registry.member(spec.name)[1].quality)
        print(f"trainclock: {spec.name} on {device}{f' x {env.world_size} processes ({layout.describe()})' if env.world_size > 1 else ''}, "
              f"target {targets}; init (data, model{', compile' if settings.compile else ''}) is not timed")
    result = execute(request)
    if result is None:  # not rank 0
        return (0, None) if want_log else 0
    print_run_summary(result)
    _import_result(result.log_path, args.db)
    code = 0 if result.outcome.status == "success" else 1
    if status_file := os.environ.get(STATUS_FILE_ENV):
        Path(status_file).write_text(f"{result.outcome.status}\n{result.log_path.resolve()}")
        code = 0  # a finished run, even aborted at a limit, is no failure for torchrun to restart
    return (code, result.log_path) if want_log else code


def _score_entry(logs: list[Path | None], codes: list[int]) -> int:
    """The entry's score by the round's rules, from the logs just written (the review's code)."""
    from trainclock.review.render import print_review
    from trainclock.review.tree import review_logs

    made = [log for log in logs if log is not None]
    if not made:
        return 0  # not rank 0
    entry = review_logs(made)
    print_review([entry], verbose=True)
    if entry.score_minutes is not None:
        print(f"trainclock: entry score {entry.score_minutes:.4f} min ({entry.verdict}; {len(made)} runs, "
              f"olympic mean of the rules of {entry.benchmark})")
        return 0
    print(f"trainclock: the entry has no score ({entry.verdict}: {'; '.join(entry.reasons) or 'see above'})")
    return 1


def _score_interrupted_entry(logs: list[Path | None], asked: int) -> None:
    """An entry stopped part-way: the runs it finished, scored by the same rules and said to be
    incomplete (fewer runs than asked for), whatever the review makes of them."""
    from trainclock.review.render import print_review
    from trainclock.review.tree import review_logs

    made = [log for log in logs if log is not None]
    if not made:
        print(f"trainclock: the entry was interrupted in its first run of {asked}: no run to score")
        return
    entry = review_logs(made)
    print_review([entry], verbose=True)
    finished = (f"{entry.score_minutes:.4f} min over the {len(made)} finished runs" if entry.score_minutes is not None
                else f"no score ({entry.verdict}: {'; '.join(entry.reasons) or 'see above'})")
    print(f"trainclock: the entry is incomplete: interrupted after {len(made)} of {asked} runs; {finished}")


def _import_result(log_path: Path, db_url: str | None) -> None:
    """Every finished run goes into the results store; a store problem is reported, and the
    run (whose log is safe on disk) still counts."""
    from trainclock.errors import TrainclockError
    from trainclock.results.importer import import_run

    try:
        import_run(log_path, db_url)
        print(f"trainclock: imported into the results store (`trainclock results list --benchmark {log_path.parent.name}`)")
    except TrainclockError as e:
        print(f"trainclock: warning: the run was not imported into the results store: {e}; "
              f"import it later with `trainclock results import {log_path}`", file=sys.stderr)
