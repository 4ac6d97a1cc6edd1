"""`trainclock run BENCHMARK`: train to the quality target, log in MLPerf format."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from trainclock.commands import args as checks
from trainclock.distributed.layout import PP_SCHEDULES
from trainclock.errors import UsageError


STATUS_FILE_ENV = "TRAINCLOCK_STATUS_FILE"  # where rank 0 tells the launching process how the run ended
# Exit codes: 0 target reached, 1 stopped at a limit (aborted), 2 bad input, 3 a process failed
PROCESS_FAILED = 3


def register(sub) -> None:
    run = sub.add_parser("run", help="train a benchmark to its quality target and log it in MLPerf format")
    run.add_argument("benchmark", help="e.g. gpt3-mini (see `trainclock list`)")
    run.add_argument("--data", help="shakespeare (default for CPU members), c4:PATH, or text file(s)/folder")
    run.add_argument("--seed", type=int, help="random seed (default: a fresh one, logged)")
    run.add_argument("--out", type=Path, default=Path("trainclock-results"), help="result tree root (default: %(default)s)")
    run.add_argument("--gbs", type=int, help="global batch size in sequences (default: the spec's)")
    run.add_argument("--micro-batch", type=int, help="sequences per forward/backward (default: the spec's)")
    run.add_argument("--precision", choices=["auto", "bf16", "fp32"], default="auto",
                     help="bf16 autocast or fp32; auto (default): bf16 where the device multiplies bf16 faster, "
                          "measured at init (a CPU without bf16 instructions trains in fp32)")
    run.add_argument("--compile", action="store_true", help="torch.compile the model (compiled during init, untimed)")
    run.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)")
    run.add_argument("--max-minutes", type=float, help="stop as aborted after this much training time")
    run.add_argument("--max-samples", type=int, help="stop as aborted after this many sequences")
    run.add_argument("--org", default="trainclock", help="submission_org in the log")
    run.add_argument("--status", default="onprem", choices=["onprem", "cloud", "preview", "research"])
    run.add_argument("--system", help="system name (default: <host>_<device>x<count>)")
    run.add_argument("--no-progress", action="store_true", help="no live progress bar")
    run.add_argument("--db", help="results database the finished run is imported into (default: SQLite in the data dir)")
    dist = run.add_argument_group("distributed (torchrun: gloo on CPU, NCCL on GPU)")
    dist.add_argument("--nproc", type=int, default=1, help="processes per node (default: 1, a plain process)")
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
    ckpt = run.add_argument_group("checkpoints")
    ckpt.add_argument("--checkpoint-every", type=int, help="save a sharded checkpoint every N steps (default: off; at each evaluation with --max-restarts)")
    ckpt.add_argument("--resume", action="store_true", help="continue the newest unfinished run from its last complete checkpoint")
    run.set_defaults(func=main)


def main(args) -> int:
    from trainclock.distributed import env as dist_env
    from trainclock.distributed.launch import run_under_torchrun, torchrun_command
    from trainclock.distributed.layout import Layout
    from trainclock.report.summary import print_run_summary
    from trainclock.train.loop import TrainOptions
    from trainclock.train.run import RunRequest, execute
    from trainclock.workloads.gpt3 import benchmark
    from trainclock.workloads.gpt3.parallelize import check_layout
    from trainclock.workloads.gpt3.spec import get_member

    spec = get_member(args.benchmark)
    checks.positive("--max-minutes", args.max_minutes)
    checks.positive("--max-samples", args.max_samples)
    checks.positive("--checkpoint-every", args.checkpoint_every)
    spec = benchmark.resolve_batch(spec, args.gbs, args.micro_batch)
    device = checks.device(args.device)
    world = args.nproc * args.nnodes
    layout = Layout.for_world(world, tp=args.tp, pp=args.pp, dp=args.dp, fsdp=args.fsdp,
                              pp_schedule=args.pp_schedule, vp=args.vp)
    check_layout(spec.shape, layout)
    benchmark.check_batch_split(spec, layout.dp)
    spec = benchmark.pipeline_batch(spec, layout, micro_given=args.micro_batch is not None)
    benchmark.check_fits(spec, device, shards=layout.world_size if args.fsdp else layout.tp * layout.pp)
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little") % (2**31)

    if world > 1 and not dist_env.under_torchrun():
        run_id = args.run_id or os.environ.get("SLURM_JOB_ID")
        cmd = torchrun_command([*args.argv, "--seed", str(seed)], args.nproc, args.nnodes, args.node_rank,
                               args.rdzv, args.max_restarts, run_id)
        print(f"trainclock: {spec.name} on {world} processes ({layout.describe()}), seed {seed}, via torchrun")
        with tempfile.TemporaryDirectory() as tmp:
            status_file = Path(tmp) / "status"
            code = run_under_torchrun(cmd, {STATUS_FILE_ENV: str(status_file)})
            status = status_file.read_text() if status_file.exists() else None
        if code:
            print(f"trainclock: error: the distributed run failed (torchrun exit code {code}); the failing ranks are named above",
                  file=sys.stderr)
            return PROCESS_FAILED
        return 0 if status == "success" else 1
    env = dist_env.current()
    if env.world_size != world:
        raise UsageError(f"torchrun started {env.world_size} processes but --nproc x --nnodes is {world}")

    options = TrainOptions(
        device=device,
        precision=args.precision,
        compile=args.compile,
        max_seconds=args.max_minutes * 60 if args.max_minutes else None,
        max_samples=args.max_samples,
        checkpoint_every_steps=args.checkpoint_every or (max(spec.eval_every_samples // spec.global_batch_size, 1)
                                                        if args.max_restarts else 0),
    )
    request = RunRequest(workload=spec.name, out=args.out, seed=seed, options=options, layout=layout, org=args.org,
                         status=args.status, system_name=args.system, progress=not args.no_progress,
                         resume=args.resume)
    if env.is_main:
        print(f"trainclock: {spec.name} on {device}{f' x {world} processes ({layout.describe()})' if world > 1 else ''}, "
              f"seed {seed}, target {spec.target_log_perplexity} validation log perplexity; "
              f"init (data, model{', compile' if args.compile else ''}) is not timed")
    result = execute(request, lambda ctx, dev: benchmark.build_job(spec, args.data, seed, ctx, dev, args.compile))
    if result is None:  # not rank 0
        return 0
    print_run_summary(result, spec.target_log_perplexity)
    _import_result(result.log_path, args.db)
    if status_file := os.environ.get(STATUS_FILE_ENV):
        Path(status_file).write_text(result.outcome.status)
        return 0  # a finished run, even aborted at a limit, is no failure for torchrun to restart
    return 0 if result.outcome.status == "success" else 1


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
