"""`trainclock plan MEMBER --accelerator ID --count N`: predict time-to-train, memory and cost of a
benchmark member on a cluster, and the `trainclock run` command for the layout chosen; `--sweep`
for a scaling curve; `--validate` for the calibration."""

from __future__ import annotations

from pathlib import Path

from trainclock.commands import args as checks
from trainclock.errors import UsageError


def register(sub) -> None:
    plan = sub.add_parser("plan", help="predict time-to-train, memory and cost on a cluster (calibrated on MLPerf)")
    plan.add_argument("benchmark", nargs="?", help="a member (<benchmark>-<size>) or an MLPerf key for the full "
                                                   "size (see `trainclock list`)")
    plan.add_argument("--accelerator", help="catalogue id, e.g. h100-sxm, h200, a100-80gb, gaudi2, tpu-v5e, this-cpu")
    plan.add_argument("--count", type=int, help="number of accelerators")
    plan.add_argument("--sweep", help="accelerator counts for a scaling curve, e.g. 512,768,1536,3584,10752")
    plan.add_argument("--gbs", type=int, help="global batch size in samples (default: the best the layout search finds)")
    plan.add_argument("--layout", help="e.g. tp=4,pp=8,vp=12,mb=1,sp=on,recompute=selective,zero=1,overlap=on,"
                                       "precision=fp8 (unset keys from the software stack; default: search)")
    plan.add_argument("--price", help="e.g. 37000/node-month or 2.10/gpu-hour, for the cost per run and per result")
    plan.add_argument("--tokens", type=float, metavar="N",
                      help="train this far, in the benchmark's progress unit (tokens, samples, epochs), instead of "
                           "what the convergence model says")
    plan.add_argument("--stack", help="calibration to use, as <accelerator>/v<round> (default: the accelerator's latest)")
    plan.add_argument("--efficiency", type=float, help="fraction of peak FLOP/s the matmuls reach, overriding calibration")
    plan.add_argument("--hardware", type=Path, action="append", default=[], metavar="FILE",
                      help="TOML file of more accelerators (repeatable); see planner/model/catalogue.toml for the form")
    plan.add_argument("--mlperf-results", type=Path, metavar="DIR",
                      help="folder laid out as shared/mlperf-results (default: found beside the repository)")
    plan.add_argument("--save", type=Path, help="write the --sweep curve here, atomically (.json or .csv)")
    plan.add_argument("--top", type=int, default=5, help="how many of the fastest layouts to list (default: %(default)s)")
    plan.add_argument("--validate", action="store_true", help="print the calibration, leave-one-out and extrapolation tables")
    plan.add_argument("--db", help="results database whose runs calibrate this-cpu and --validate's CPU tiers "
                                   "(default: $TRAINCLOCK_DB, else the user's)")
    plan.add_argument("--list-hardware", action="store_true", help="print the accelerator catalogue")
    plan.set_defaults(func=main)


def main(args) -> int:
    from trainclock.planner.output import tables
    from trainclock.planner.model.hardware import THIS_CPU, load_catalogue

    catalogue = load_catalogue(args.hardware)
    if args.list_hardware:
        tables.print_catalogue(catalogue)
        return 0
    if args.validate:
        return _validate(args, catalogue)
    if not args.benchmark:
        raise UsageError(f"name a benchmark member to plan, e.g. `trainclock plan {_example_benchmark()} --accelerator "
                         "h100-sxm --count N` (see `trainclock list`), or use --validate or --list-hardware")
    if not args.accelerator:
        raise UsageError("--accelerator is required, e.g. --accelerator h100-sxm (see --list-hardware)")
    if (args.count is None) == (args.sweep is None):
        raise UsageError("give either --count N or --sweep N1,N2,...")
    if args.save and not args.sweep:
        raise UsageError("--save writes a scaling curve: use it with --sweep")
    if args.save:
        from trainclock.planner.output.scaling_curve import check_save_path

        check_save_path(args.save)
    for flag, value in (("--gbs", args.gbs), ("--tokens", args.tokens), ("--top", args.top)):
        checks.positive(flag, value)
    planner = _planner(args, catalogue, _own_runs(args)[0] if args.accelerator == THIS_CPU else [])
    accelerator = planner.accelerator(args.accelerator)
    return _sweep(args, planner, accelerator) if args.sweep else _plan(args, planner, accelerator)


def _planner(args, catalogue, own_runs):
    from trainclock.planner.plan import Planner
    from trainclock.planner.model.workload_view import cost_model

    return Planner(cost_model(args.benchmark), catalogue, args.mlperf_results, own_runs)


def _own_runs(args):
    """(the stored runs timed on this kind of CPU in one process, the StoredRuns read); no runs
    where the store cannot be read (this-cpu then falls back to the reference runs' MFU)."""
    from trainclock.commands.stored_runs import StoredRuns, read_this_machines_runs
    from trainclock.errors import DataError

    try:
        stored = read_this_machines_runs(args.db)
    except DataError:
        return [], StoredRuns()
    return stored.runs, stored


def _layout_fields(args) -> dict[str, object]:
    from trainclock.planner.model.parallel_plan import parse_layout

    return parse_layout(args.layout) if args.layout else {}


def _price(args, accelerator):
    from trainclock.planner.model.run_cost import parse_price

    return parse_price(args.price, accelerator) if args.price else None


def _plan(args, planner, accelerator) -> int:
    from trainclock.planner.output import tables
    from trainclock.planner.model.run_cost import run_cost

    given, price = _layout_fields(args), _price(args, accelerator)
    calibrated = planner.calibrated(accelerator, args.stack, args.efficiency)
    prediction, found = planner.plan(accelerator, args.count, calibrated, given, args.gbs, args.tokens)
    tables.print_plan(prediction, calibrated, found, run_cost(prediction, price), price, args.top)
    _print_reference(args, planner, accelerator, calibrated, given, prediction)
    return 0


def _print_reference(args, planner, accelerator, calibrated, given, prediction) -> None:
    """Where others published a figure for this very system: the prediction beside it."""
    from trainclock.planner.output import tables
    from trainclock.planner.model.published_layouts import reference_figure

    figure = reference_figure(planner.cost.benchmark, accelerator.id, args.count) if planner.full_size else None
    if figure is None or args.tokens is not None:  # trained as far as --tokens says: not the published run
        return
    smaller = (planner.plan(accelerator, figure.compare_count, calibrated, given, args.gbs)[0]
               if figure.compare_count else None)
    tables.print_reference(prediction, figure, smaller)


def _sweep(args, planner, accelerator) -> int:
    from trainclock.planner.output import scaling_curve as sweep
    from trainclock.planner.output import tables

    given, price = _layout_fields(args), _price(args, accelerator)
    calibrated = planner.calibrated(accelerator, args.stack, args.efficiency)
    predictions = [planner.plan(accelerator, n, calibrated, given, args.gbs, args.tokens)[0]
                   for n in sweep.parse_counts(args.sweep)]
    points = sweep.curve(predictions, price)
    tables.print_sweep(points, f"{planner.cost.name} on {accelerator.id}: predicted scaling ({calibrated.source})")
    if args.save:
        sweep.save_curve(points, args.save, {
            "member": planner.cost.name, "benchmark": planner.cost.benchmark, "accelerator": accelerator.id, "calibration": calibrated.source,
            "matmul_efficiency": calibrated.efficiency.compute, "eval_matmul_efficiency": calibrated.efficiency.eval_compute,
            "eval_overhead_s": calibrated.efficiency.eval_overhead_s,
            "price": args.price, "layout_given": args.layout,
        })
        print(f"trainclock: scaling curve saved to {args.save}")
    return 0


def _example_benchmark() -> str:
    """An MLPerf key the planner has a cost model for, from the registry, for a message."""
    from trainclock.errors import TrainclockError
    from trainclock.workload import registry

    for workload in registry.workloads():
        try:
            if workload.cost(workload.full_size) is not None:
                return workload.key
        except (TrainclockError, StopIteration):
            continue
    return "MEMBER"


def _validate(args, catalogue) -> int:
    from trainclock.planner.calibration import result_files as calibrate
    from trainclock.planner.output import tables
    from trainclock.planner.validation import result_file_checks as validation
    from trainclock.planner.calibration.mlperf_data import results_dir

    data = calibrate.load_calibration_data(results_dir(args.mlperf_results), catalogue)
    report = validation.validate(data)
    tables.print_validation(report)
    # the other benchmarks: their published scores, fitted per accelerator (no goal yet: see the spread)
    from trainclock.console import table_console
    from trainclock.errors import DataError
    from trainclock.planner.calibration.published_scores import suite_dir
    from trainclock.planner.output.score_tables import print_suite_validation
    from trainclock.planner.validation.score_checks import validate_suite

    try:
        suite = validate_suite(suite_dir(), catalogue, lambda: results_dir(args.mlperf_results))
    except DataError as e:  # the result-file tables above stand; say why the others are missing
        print(f"trainclock: the other benchmarks are not validated: {e}")
    else:
        print_suite_validation(suite, table_console(None))
    _validate_own_runs(args, table_console(None))
    return 0 if report.meets_goal else 1


def _validate_own_runs(args, console) -> None:
    """This machine's CPU tiers against trainclock's own runs in the results store."""
    from trainclock.device.system import cpu_identity
    from trainclock.planner.model.convergence import load_convergence
    from trainclock.planner.model.hardware import this_cpu
    from trainclock.planner.calibration.mlperf_data import results_dir
    from trainclock.planner.calibration.own_runs import leave_one_out, measured_peaks
    from trainclock.planner.output.own_run_tables import print_own_runs
    from trainclock.planner.model.workload_view import cost_model

    mine, stored = _own_runs(args)
    checks = leave_one_out(mine, this_cpu(*measured_peaks(mine)), cost_model,
                           lambda cost: load_convergence(cost, lambda: results_dir(args.mlperf_results)))
    machine = cpu_identity()
    if not checks:
        print(f"trainclock: the CPU tiers are not validated: the results store holds no two finished runs of a "
              f"tier on this machine ({machine}); `trainclock run <tier> --seed N` adds them"
              + (f" (left out: {stored.describe_left_out()})" if stored.left_out else ""))
        return
    print_own_runs(checks, machine, stored.describe_left_out(), console)
