"""A live progress bar for the timed region: step, tokens/s, train loss, last eval, elapsed."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn


class TrainProgress:
    def __init__(self, total_samples: int, target: float, enabled: bool = True, console: Console | None = None) -> None:
        self._progress = Progress(
            TextColumn("[bold]train"),
            BarColumn(),
            TextColumn("step {task.fields[step]:>5}"),
            TextColumn("{task.fields[tps]:>8} tok/s"),
            TextColumn("loss {task.fields[loss]}"),
            TextColumn("eval {task.fields[eval]} (target {task.fields[target]})"),
            TimeElapsedColumn(),
            console=console,
            disable=not enabled,
            transient=False,
        )
        self._task = self._progress.add_task("train", total=total_samples, step=0, tps="-", loss="-",
                                             eval="-", target=f"{target:.3f}")

    def __enter__(self) -> "TrainProgress":
        self._progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.__exit__(*exc)

    def stepped(self, step: int, samples: int, loss: float, tokens_per_s: float) -> None:
        self._progress.update(self._task, completed=samples, step=step, tps=f"{tokens_per_s:,.0f}", loss=f"{loss:.3f}")

    def evaluated(self, metric: float) -> None:
        self._progress.update(self._task, eval=f"{metric:.3f}")
