"""Writes golden_curves.json: gpt3-tiny's per-step training losses and evals under a fixed seed
(1 process, 2-process DDP, 2-process FSDP2), from the code as it is. Kept so that refactors of the
loop and the distributed package can prove the curves unchanged (tests/workloads/gpt3/test_golden_curves.py).
Run: python tests/workloads/gpt3/make_golden_curves.py"""

from __future__ import annotations

import json
import platform
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.conftest import make_text  # noqa: E402
from tests.distributed.helpers import evals, losses, run  # noqa: E402

LAYOUTS = {"1": [], "ddp2": ["--nproc", "2"], "fsdp2": ["--nproc", "2", "--fsdp"]}
SAMPLES = 320


def curve_args(corpus: Path, out: Path, *extra: str) -> list[str]:
    return ["run", "gpt3-tiny", "--data", str(corpus), "--out", str(out), "--seed", "5", "--no-progress",
            "--precision", "fp32", "--max-samples", str(SAMPLES), *extra]


def write_corpus(folder: Path) -> Path:
    for i in range(3):
        (folder / f"play_{i}.txt").write_text(make_text(i, 7000))
    return folder


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    return {"cpu": cpu, "torch": torch.__version__}


def main() -> None:
    curves = {}
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus"
        corpus.mkdir()
        write_corpus(corpus)
        for name, extra in LAYOUTS.items():
            out = Path(tmp) / name
            proc = run(curve_args(corpus, out, *extra))
            assert proc.returncode in (0, 1), proc.stderr[-2000:]
            curves[name] = {"losses": losses(out), "evals": evals(out)}
    target = Path(__file__).with_name("golden_curves.json")
    target.write_text(json.dumps({"machine": machine(), "samples": SAMPLES, "curves": curves}, indent=1) + "\n")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
