"""`trainclock launch slurm|k8s BENCHMARK`: write the job that runs `trainclock run` across the
nodes of a cluster (an sbatch script, or a Kubernetes manifest), and with --submit submit it.

Arguments after `--` go to every node's `trainclock run` unchanged; they are checked here, with
run's own parser, so that a typo fails now rather than hours later in the queue."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trainclock.commands import args as checks
from trainclock.errors import UsageError

_RUN_HELP = "arguments after `--` go to `trainclock run` on every node (e.g. -- --max-samples 4096 --fsdp)"


class RunArgsParser(argparse.ArgumentParser):
    """A command parser that keeps everything after the first `--` for `trainclock run`, in
    `args.run_args`. argparse alone cannot: once BENCHMARK is matched it has no positional left
    for a later `--` list, and it rejects it."""

    def parse_known_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        run_args = []
        if "--" in args:
            cut = args.index("--")
            args, run_args = args[:cut], args[cut + 1:]
        namespace, extras = super().parse_known_args(args, namespace)
        namespace.run_args = run_args
        return namespace, extras


def add_command(sub, name: str, help: str, description: str, epilog: str = _RUN_HELP) -> RunArgsParser:
    """Add a command whose parser takes `-- run args`. The parser argparse makes is kept only for
    the command list in --help; `choices` is where a subparsers action looks a command up."""
    placeholder = sub.add_parser(name, help=help)
    parser = RunArgsParser(prog=placeholder.prog, description=description, epilog=epilog)
    sub.choices[name] = parser
    return parser


class _RaisingParser(argparse.ArgumentParser):
    """run's parser for checking: a problem raises a one-line UsageError instead of exiting, and
    options must be spelled out (an abbreviation would hide a flag the caller owns)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**{**kwargs, "allow_abbrev": False})

    def error(self, message: str):
        raise UsageError(f"bad arguments for `trainclock run` after `--`: {message}")


def check_run_args(benchmark: str, run_args: list[str], owned: dict[str, str]) -> None:
    """Refuse run arguments that the calling command sets itself (`owned`: flag -> what to use
    instead) and anything `trainclock run` would reject."""
    from trainclock.commands import run

    for token in run_args:
        flag = token.split("=", 1)[0]
        if flag in owned:
            raise UsageError(f"{flag} is set by this command, not passed to `trainclock run`; {owned[flag]}")
    sub = argparse.ArgumentParser().add_subparsers(parser_class=_RaisingParser)
    run.register(sub)
    parsed = sub.choices["run"].parse_args([benchmark, *run_args])
    run.check_names(parsed)  # a --system or --data the run would refuse, refused before the job queues


def register(sub) -> None:
    launch = sub.add_parser("launch", help="write (and submit) a multi-node run for Slurm or Kubernetes")
    schedulers = launch.add_subparsers(required=True, metavar="SCHEDULER", dest="scheduler")

    slurm = add_command(schedulers, "slurm", help="an sbatch script: srun, one task per node, torchrun inside",
                        description="Write an sbatch script that runs `trainclock run` on every node under srun.")
    _add_shape(slurm)
    slurm.add_argument("--out", type=Path, default=Path("trainclock-results"),
                       help="result tree root, on a filesystem all nodes share (default: %(default)s)")
    slurm.add_argument("--script", type=Path, help="where to write the script (default: <out>/slurm/<job-name>.sbatch)")
    slurm.add_argument("--partition", help="Slurm partition")
    slurm.add_argument("--time", help="time limit, HH:MM:SS or D-HH:MM:SS")
    slurm.add_argument("--account", help="Slurm account to charge")
    where = slurm.add_mutually_exclusive_group()
    where.add_argument("--image", help="container image with trainclock, run through pyxis (srun --container-image)")
    where.add_argument("--venv", type=Path, help="virtual environment with trainclock, at the same path on every node")
    slurm.add_argument("--submit", action="store_true", help="submit with sbatch and print the job id")
    slurm.set_defaults(func=main)

    k8s = add_command(schedulers, "k8s", help="a Kubernetes manifest: indexed Job + headless Service",
                      description="Write a Kubernetes manifest (indexed Job, headless Service, results volume) "
                                  "that runs `trainclock run` in one pod per node.")
    _add_shape(k8s)
    k8s.add_argument("--image", required=True, help="container image with trainclock installed")
    k8s.add_argument("--namespace", default="default", help="Kubernetes namespace (default: %(default)s)")
    k8s.add_argument("--out", type=Path, help="manifest file to write (default: <job-name>.yaml)")
    k8s.add_argument("--results-claim", help="an existing PersistentVolumeClaim for the results "
                                              "(default: the manifest creates <job-name>-results, ReadWriteMany)")
    k8s.add_argument("--results-size", default="10Gi", help="size of the claim the manifest creates (default: %(default)s)")
    k8s.add_argument("--storage-class", help="storage class of the claim the manifest creates (default: the cluster's)")
    k8s.set_defaults(func=main)


def _add_shape(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("benchmark", help="a member (<benchmark>-<size>) or an MLPerf key for the full size "
                                          "(see `trainclock list`)")
    parser.add_argument("--nodes", type=int, required=True, help="number of nodes")
    parser.add_argument("--gpus-per-node", type=int, required=True,
                        help="processes per node, one per GPU (with --device cpu: CPU processes)")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cuda (default, NCCL) or cpu (gloo, no GPUs requested)")
    parser.add_argument("--job-name", help="job name (default: trainclock-<benchmark>)")
    parser.add_argument("--port", type=int, default=29500, help="rendezvous port on the first node (default: %(default)s)")


# run flags a launcher sets from its own options
_OWNED = {
    "--nproc": "use --gpus-per-node",
    "--nnodes": "use --nodes",
    "--node-rank": "each node gets its own",
    "--rdzv": "the first node hosts it; use --port to move it",
    "--run-id": "the job's id is used",
    "--device": "use --device before `--`",
    "--out": "use --out before `--`",
}


def main(args) -> int:
    from trainclock.workload import registry

    registry.find(args.benchmark)  # an unknown name fails here, not on the cluster
    checks.at_most("--nodes", args.nodes, checks.MAX_NODES)  # the lower bounds: distributed.slurm/k8s check_shape
    checks.at_most("--gpus-per-node", args.gpus_per_node, checks.MAX_PROCS_PER_NODE)
    check_run_args(args.benchmark, args.run_args, _OWNED)
    return _slurm(args) if args.scheduler == "slurm" else _k8s(args)


def _slurm(args) -> int:
    from trainclock.distributed import slurm
    from trainclock.storage import atomic_write_text

    job = slurm.SlurmJob(
        benchmark=args.benchmark, nodes=args.nodes, gpus_per_node=args.gpus_per_node, out=args.out.absolute(),
        run_args=tuple(args.run_args), device=args.device, partition=args.partition, time_limit=args.time,
        account=args.account, image=args.image, venv=args.venv.absolute() if args.venv else None,
        port=args.port, job_name=args.job_name,
    )
    text = slurm.render(job)
    script = args.script or job.out / "slurm" / f"{job.name}.sbatch"
    # Slurm opens the console file before the script runs: its folder must exist already
    (job.out / "slurm").mkdir(parents=True, exist_ok=True)
    atomic_write_text(script, text)
    processes = job.nodes * job.gpus_per_node
    print(f"wrote {script}: {job.benchmark} on {job.nodes} node(s) x {job.gpus_per_node} = {processes} processes")
    if args.submit:
        job_id = slurm.submit(script)
        print(f"submitted Slurm job {job_id}; console: {job.out / 'slurm'}/{job.name}-{job_id}.out; "
              f"MLPerf log: {job.out}/results/<system>/{job.benchmark}/")
    else:
        print(f"submit it with: sbatch {script}")
    return 0


def _k8s(args) -> int:
    from trainclock.distributed import k8s
    from trainclock.storage import atomic_write_text

    job = k8s.K8sJob(
        benchmark=args.benchmark, nodes=args.nodes, gpus_per_node=args.gpus_per_node, image=args.image,
        run_args=tuple(args.run_args), namespace=args.namespace, device=args.device, port=args.port,
        job_name=args.job_name, results_claim=args.results_claim, results_size=args.results_size,
        storage_class=args.storage_class,
    )
    text = k8s.render(job)
    path = args.out or Path(f"{job.name}.yaml")
    atomic_write_text(path, text)
    print(f"wrote {path}: {job.benchmark} on {job.nodes} pod(s) x {job.gpus_per_node} = "
          f"{job.nodes * job.gpus_per_node} processes; results on claim {job.claim} at {k8s.RESULTS_MOUNT}")
    print(f"start it with: kubectl apply -f {path}")
    return 0
