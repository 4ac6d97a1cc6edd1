"""A stand-in for `trainclock run` that leaves the files a real run leaves (an MLPerf log and a
metrics file) with timings chosen by the test, so the sweep's arithmetic can be checked exactly."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from trainclock.mllog import RunLog

TOKENS_PER_STEP = 4096


@dataclass(frozen=True)
class FakeSize:
    step_seconds: tuple[float, ...]  # one per training step
    time_to_train_ms: int
    status: str = "aborted"


@dataclass
class FakeRunner:
    sizes: dict[int, FakeSize]
    calls: list[tuple[list[str], dict[str, str]]] = field(default_factory=list)
    exit_code: int | None = None  # None: 0 on success, 1 when aborted, as trainclock run does
    write_log: bool = True

    def __call__(self, argv: list[str], env: dict[str, str]) -> int:
        self.calls.append((argv, env))
        nproc, out = int(argv[argv.index("--nproc") + 1]), Path(argv[argv.index("--out") + 1])
        fake = self.sizes[nproc]
        if self.write_log:
            folder = out / "results" / f"host_cpux{nproc}" / argv[1]
            folder.mkdir(parents=True, exist_ok=True)
            index = len(list(folder.glob("result_*.txt")))
            write_run(folder / f"result_{index}.txt", fake)
        if self.exit_code is not None:
            return self.exit_code
        return 0 if fake.status == "success" else 1

    def seeds(self, nproc: int) -> list[int]:
        return [int(argv[argv.index("--seed") + 1]) for argv, _ in self.calls
                if argv[argv.index("--nproc") + 1] == str(nproc)]


def write_run(log_path: Path, fake: FakeSize) -> None:
    start = 1_700_000_000_000
    log = RunLog(log_path)
    log.start("init_start", time_ms=start - 5000)
    log.end("init_stop", time_ms=start - 10)
    log.start("run_start", time_ms=start)
    log.end("run_stop", metadata={"status": fake.status}, time_ms=start + fake.time_to_train_ms)
    log.finish()
    rows = []
    for step, seconds in enumerate(fake.step_seconds):
        rows.append({"step": step, "samples": 32 * (step + 1), "units": TOKENS_PER_STEP * (step + 1),
                     "loss": 5.0, "units_per_s": TOKENS_PER_STEP / seconds})
    rows.append({"step": len(fake.step_seconds) - 1, "units": TOKENS_PER_STEP * len(fake.step_seconds), "eval": 4.9})
    log_path.with_name(log_path.stem + ".metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def expected_throughput(fake: FakeSize) -> float:
    return TOKENS_PER_STEP * len(fake.step_seconds) / sum(fake.step_seconds)
