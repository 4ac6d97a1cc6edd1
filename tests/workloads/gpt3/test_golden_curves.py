"""GPT-3's loss curves are those of the code before the workload interface (tests/workloads/gpt3/
golden_curves.json, written by make_golden_curves.py): refactors of the loop, the workload contract
and the distributed package must not change a single loss. Bit-identical on the machine (CPU and
torch) that stored them; elsewhere matmul kernels round differently, so a tight tolerance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.distributed.helpers import evals, losses, run
from tests.workloads.gpt3.make_golden_curves import LAYOUTS, curve_args, machine

GOLDEN = json.loads(Path(__file__).with_name("golden_curves.json").read_text())


@pytest.mark.parametrize("layout", list(LAYOUTS), ids=list(LAYOUTS))
def test_curves_unchanged(corpus_dir, tmp_path, layout):
    proc = run(curve_args(corpus_dir, tmp_path, *LAYOUTS[layout]))
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "imported into the results store" in proc.stdout, proc.stdout[-2000:]
    stored = GOLDEN["curves"][layout]
    got = {"losses": losses(tmp_path), "evals": [[count, value] for count, value in evals(tmp_path)]}
    if machine() == GOLDEN["machine"]:
        assert got == stored
    else:
        assert got["losses"] == pytest.approx(stored["losses"], rel=1e-4)
        assert [c for c, _ in got["evals"]] == [c for c, _ in stored["evals"]]
        assert [v for _, v in got["evals"]] == pytest.approx([v for _, v in stored["evals"]], rel=1e-4)


@pytest.mark.parametrize("layout", ["1", "fsdp2"])
def test_activation_checkpointing_recomputes_the_same_curve(corpus_dir, tmp_path, layout):
    """Recomputing each block's activations in backward is the same arithmetic: the same losses,
    also with FSDP2 (which must gather a block's weights again for the recomputation)."""
    proc = run(curve_args(corpus_dir, tmp_path, *LAYOUTS[layout], "--activation-checkpointing"))
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert losses(tmp_path) == pytest.approx(GOLDEN["curves"][layout]["losses"], rel=1e-6)
