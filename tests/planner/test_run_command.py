"""The plan and `trainclock run` share one Layout: the flags the planner prints for a layout are
parsed by `trainclock run`'s own parser and rebuilt by Layout.for_world into the same layout."""

import argparse
import re
import shlex

import pytest

from trainclock.commands import run as run_command_line
from trainclock.distributed.layout import Layout
from trainclock.errors import UsageError
from trainclock.planner.model.predict import predict
from trainclock.planner.model.step_time import Efficiency
from trainclock.planner.model.workload_view import cost_model
from trainclock.planner.output.run_command import run_command

from .helpers import accelerator, plan


def parsed_by_trainclock_run(argv: list[str]) -> tuple[argparse.Namespace, Layout]:
    parser = argparse.ArgumentParser(prog="trainclock")
    run_command_line.register(parser.add_subparsers(required=True))
    args = parser.parse_args(argv)
    layout = Layout.for_world(args.nproc * args.nnodes, tp=args.tp, pp=args.pp, dp=args.dp, fsdp=args.fsdp,
                              pp_schedule=args.pp_schedule, vp=args.vp)
    return args, layout


@pytest.mark.parametrize("layout, per_node, flags", [
    (Layout(dp=336, tp=4, pp=8, pp_schedule="interleaved-1f1b", vp=12), 8,
     ["--nproc", "8", "--nnodes", "1344", "--tp", "4", "--pp", "8", "--vp", "12"]),
    (Layout(dp=4, tp=2, pp=4, fsdp=True), 8, ["--nproc", "8", "--nnodes", "4", "--tp", "2", "--pp", "4", "--fsdp"]),
    (Layout(dp=2, pp=2, pp_schedule="gpipe"), 8, ["--nproc", "4", "--nnodes", "1", "--pp", "2", "--pp-schedule", "gpipe"]),
    (Layout(dp=3, tp=4), 8, ["--nproc", "6", "--nnodes", "2", "--tp", "4"]),  # 12 on nodes of 8: 6 per node
    (Layout(), 1, ["--nproc", "1", "--nnodes", "1"]),
    (Layout(dp=8, pp=3, pp_schedule="interleaved-1f1b", vp=3), 4,
     ["--nproc", "4", "--nnodes", "6", "--pp", "3", "--vp", "3"]),
])
def test_run_flags_parse_back_into_the_same_layout(layout, per_node, flags):
    assert layout.run_flags(per_node) == flags
    args, parsed = parsed_by_trainclock_run(["run", "gpt3-175b", *flags])
    assert parsed == layout
    assert args.nproc <= per_node


def test_run_flags_need_a_node_size():
    with pytest.raises(UsageError, match="a node holds at least 1 accelerator"):
        Layout().run_flags(0)


def test_groups_follow_the_mesh_order():
    layout = Layout(dp=3, tp=4, pp=2)
    assert [layout.group(d) for d in ("tp", "dp", "pp")] == [(1, 4), (4, 3), (12, 2)]


def test_the_command_of_a_prediction_and_what_it_cannot_set():
    chosen = plan(tp=4, pp=8, dp=16, vp=12, micro_batch=1, sequence_parallel=True, recompute="selective", zero=1,
                  precision="fp8")
    p = predict(cost_model("gpt3-175b"), accelerator(), 2048, chosen, Efficiency(0.4), units=10**9)
    command, not_run = run_command(p)
    argv = shlex.split(command)
    assert argv[:3] == ["trainclock", "run", "gpt3-175b"]
    args, layout = parsed_by_trainclock_run(argv[1:])
    assert layout == chosen.layout and (args.gbs, args.micro_batch) == (2048, 1)
    assert not_run == ("not set by trainclock run: fp8 matmuls, sequence parallelism, selective recomputation, "
                       "ZeRO-1 sharding short of FSDP")
    whole = plan(dp=8, recompute="full", zero=3, precision="bf16")
    command, not_run = run_command(predict(cost_model("gpt3-125m"), accelerator(), 256, whole, Efficiency(0.4), units=10**9))
    args, layout = parsed_by_trainclock_run(shlex.split(command)[1:])
    assert layout == whole.layout and layout.fsdp and args.precision == "bf16" and args.activation_checkpointing
    assert not_run == ""


def test_plan_prints_a_run_command_for_the_layout_it_chose(mlperf_dir, monkeypatch, capsys):
    from trainclock.commands import plan as plan_command_line

    monkeypatch.setenv("COLUMNS", "400")
    parser = argparse.ArgumentParser(prog="trainclock")
    plan_command_line.register(parser.add_subparsers(required=True))
    args = parser.parse_args(["plan", "gpt3-175b", "--accelerator", "h100-sxm", "--count", "3584", "--gbs", "2688",
                              "--layout", "tp=4,pp=8,vp=12", "--mlperf-results", str(mlperf_dir)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    line = re.search(r"(trainclock run gpt3-175b [^│]*?)\s*│", out).group(1)
    _, layout = parsed_by_trainclock_run(shlex.split(line)[1:])
    assert layout == Layout(dp=112, tp=4, pp=8, pp_schedule="interleaved-1f1b", vp=12)
    assert "--nproc 8 --nnodes 448" in line and "--gbs 2688 --micro-batch 1" in line
