"""A live progress bar for the timed region: step, throughput in the workload's unit, train loss,
last evaluation against the target, elapsed."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from trainclock.workload.base import QualityTarget

# short unit names for a narrow bar
_SHORT = {"tokens": "tok", "samples": "samples", "images": "img"}


class TrainProgress:
    def __init__(self, total_samples: int, quality: tuple[QualityTarget, ...], unit: str, enabled: bool = True,
                 console: Console | None = None) -> None:
        self._quality = quality
        self._progress = Progress(
            TextColumn("[bold]train"),
            BarColumn(),
            TextColumn("step {task.fields[step]:>5}"),
            TextColumn(f"{{task.fields[rate]:>8}} {_SHORT.get(unit, unit)}/s"),
            TextColumn("loss {task.fields[loss]}"),
            TextColumn("eval {task.fields[eval]} (target {task.fields[target]})"),
            TimeElapsedColumn(),
            console=console,
            disable=not enabled,
            transient=False,
        )
        target = ", ".join(f"{'<=' if t.direction == 'lower' else '>='} {t.threshold:.3f}" for t in quality)
        self._task = self._progress.add_task("train", total=total_samples, step=0, rate="-", loss="-",
                                             eval="-", target=target)

    def __enter__(self) -> "TrainProgress":
        self._progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.__exit__(*exc)

    def stepped(self, step: int, samples: int, loss: float, units_per_s: float) -> None:
        self._progress.update(self._task, completed=samples, step=step, rate=f"{units_per_s:,.0f}", loss=f"{loss:.3f}")

    def evaluated(self, metrics: dict[str, float]) -> None:
        self._progress.update(self._task, eval=", ".join(f"{metrics[t.metric]:.3f}" for t in self._quality))
