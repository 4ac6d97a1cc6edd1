"""Terminal tables for a finished run and for the benchmark list."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from trainclock.console import table_console

from trainclock.train.run import RunResult


def print_run_summary(result: RunResult, target: float, console: Console | None = None) -> None:
    console = table_console(console)
    o = result.outcome
    table = Table(title=f"run {o.status}", show_header=False, title_style="bold green" if o.status == "success" else "bold red")
    table.add_column(style="bold")
    table.add_column()
    best = min((m for _, m in o.evals), default=float("nan"))
    table.add_row("time-to-train", f"{result.time_to_train_ms / 60000:.3f} min ({result.time_to_train_s:.1f} s, run_stop - run_start)")
    table.add_row("quality", f"{best:.4f} validation log perplexity (target {target})")
    table.add_row("tokens to target" if o.status == "success" else "tokens trained", f"{o.tokens:,} ({o.steps} steps)")
    table.add_row("throughput", f"{result.tokens_per_s:,.0f} tokens/s (training steps, evaluation excluded)")
    peak = result.peak_flops * result.world_size
    per_process = f", {result.world_size} processes x {result.peak_flops / 1e9:,.1f}" if result.world_size > 1 else ""
    table.add_row("MFU", f"{result.mfu:.1%} ({result.achieved_flops / 1e9:,.1f} of {peak / 1e9:,.1f} GFLOP/s "
                         f"measured matmul peak{per_process})")
    table.add_row("MLPerf log", str(result.log_path))
    table.add_row("metrics", str(result.metrics_path))
    table.add_row("system", str(result.system_path))
    console.print(table)


def print_members(console: Console | None = None) -> None:
    from trainclock.workloads.gpt3.spec import MEMBERS

    console = table_console(console)
    table = Table(title="GPT-3 benchmark members")
    for col in ("name", "parameters", "layers", "d_model", "heads", "context", "vocab", "batch (seq)", "target", "target from"):
        table.add_column(col, justify="right" if col not in ("name", "target from") else "left")
    for spec in MEMBERS.values():
        s = spec.shape
        table.add_row(spec.name, f"{s.parameter_count() / 1e6:,.1f}M", str(s.n_layer), str(s.d_model), str(s.n_head),
                      str(s.context), str(s.vocab_size), str(spec.global_batch_size),
                      f"{spec.target_log_perplexity:.3f}", spec.target_source.split(":")[0])
    console.print(table)
