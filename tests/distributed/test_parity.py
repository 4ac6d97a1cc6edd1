"""A 2-process run trains the same model as a 1-process run: same global batch, same samples,
same initial weights, so the loss curves match to reduction-order tolerance."""

import pytest

from tests.distributed.helpers import losses, run, tiny_args


@pytest.fixture(scope="module")
def reference(corpus_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("one-process")
    proc = run(tiny_args(corpus_dir, out))
    assert proc.returncode in (0, 1), proc.stderr
    return losses(out)


@pytest.mark.parametrize("layout", [[], ["--fsdp"], ["--tp", "2"], ["--pp", "2"]], ids=["ddp", "fsdp2", "tp2", "pp2"])
def test_two_processes_match_one(reference, corpus_dir, tmp_path, layout):
    proc = run(tiny_args(corpus_dir, tmp_path, "--nproc", "2", *layout))
    assert proc.returncode in (0, 1) and "run " in proc.stdout, proc.stderr[-3000:]
    curve = losses(tmp_path)
    # both stop at the same step: the sample limit, or the evaluation that meets the target (the
    # test corpus's grammar meets gpt3-tiny's at its second evaluation, 16 steps in)
    assert len(curve) == len(reference) >= 16
    assert curve == pytest.approx(reference, rel=2e-4, abs=2e-4)
    assert curve[-1] < curve[0] - 0.5  # it trained


@pytest.mark.parametrize("schedule, described, accumulation",
                         [(["--pp-schedule", "gpipe", "--micro-batch", "32"], "pp=2 (gpipe)", 1),
                          (["--pp-schedule", "interleaved-1f1b"], "pp=2 (interleaved-1f1b, vp=2)", 2)],
                         ids=["gpipe-one-microbatch", "interleaved"])
def test_pipeline_schedules_match_one(reference, corpus_dir, tmp_path, schedule, described, accumulation):
    """GPipe (here with the whole batch as one micro-batch) and interleaved 1F1B (each rank holds
    two of four one-layer stages) train the same model as 1F1B and as one process."""
    proc = run(tiny_args(corpus_dir, tmp_path, "--nproc", "2", "--pp", "2", *schedule, samples=320))
    assert proc.returncode in (0, 1) and "run " in proc.stdout, proc.stderr[-3000:]
    log = next(tmp_path.glob("results/*/gpt3-tiny/result_0.txt")).read_text()
    assert f'"value": "dp=1 (ddp) tp=1 {described}"' in log
    assert f'"key": "gradient_accumulation_steps", "value": {accumulation},' in log
    assert losses(tmp_path) == pytest.approx(reference[:10], rel=2e-4, abs=2e-4)


@pytest.mark.slow
@pytest.mark.parametrize("layout, described", [(["--pp", "2", "--pp-schedule", "gpipe"], "dp=2 (ddp) tp=1 pp=2 (gpipe)"),
                                               (["--pp", "2", "--fsdp", "--vp", "2"],
                                                "dp=2 (fsdp) tp=1 pp=2 (interleaved-1f1b, vp=2)"),
                                               (["--pp", "2", "--tp", "2"], "dp=1 (ddp) tp=2 pp=2 (1f1b)"),
                                               (["--tp", "2", "--fsdp"], "dp=2 (fsdp) tp=2 pp=1")],
                         ids=["pp2xddp2", "pp2xfsdp2", "pp2xtp2", "tp2xfsdp2"])
def test_two_parallel_dimensions_match_one(reference, corpus_dir, tmp_path, layout, described):
    """4 processes: two pipeline stages, each replicated (DDP), sharded (FSDP2) or split by tensor
    parallel over two ranks; and FSDP2 over tensor parallel (2-D meshes)."""
    proc = run(tiny_args(corpus_dir, tmp_path, "--nproc", "4", *layout), timeout=400)
    assert proc.returncode in (0, 1) and "run " in proc.stdout, proc.stderr[-3000:]
    log = next(tmp_path.glob("results/*/gpt3-tiny/result_0.txt")).read_text()
    assert f'"value": "{described}"' in log
    curve = losses(tmp_path)
    assert curve == pytest.approx(reference, rel=2e-4, abs=2e-4)


@pytest.mark.slow
def test_three_parallel_dimensions_match_one(reference, corpus_dir, tmp_path):
    """8 processes, the layout of the large members: pipeline x tensor parallel x FSDP2 (6 steps)."""
    proc = run(tiny_args(corpus_dir, tmp_path, "--nproc", "8", "--pp", "2", "--tp", "2", "--fsdp", samples=192),
               timeout=500)
    assert proc.returncode in (0, 1) and "run " in proc.stdout, proc.stderr[-3000:]
    assert losses(tmp_path) == pytest.approx(reference[:6], rel=2e-4, abs=2e-4)
