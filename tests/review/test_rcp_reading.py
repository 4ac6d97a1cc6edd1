"""Each run's convergence point and batch size as the RCP check reads them, log by log against
rcp_checker.read_submission_file: epochs, samples, tokens, and stable diffusion's step_num at the
first evaluation passing FID and CLIP; the batch size wherever the log names it."""

from __future__ import annotations

import logging
import re

import pytest
from mlperf_logging.rcp_checker import rcp_checker

from trainclock.review.tree import review_path

RULESETS = {"3.0": "3.0.0", "3.1": "3.1.0"}


@pytest.fixture(scope="module")
def all_entries(shared_results, shared_suite):
    return review_path(shared_results) + review_path(shared_suite)


def test_every_run_reads_as_rcp_checker_reads_it(all_entries):
    logging.disable(logging.CRITICAL)
    try:
        for entry in all_entries:
            for run in entry.runs:
                not_converged, point, batch_size, benchmark = rcp_checker.read_submission_file(
                    str(run.path), RULESETS[run.round], False)
                assert benchmark == run.benchmark and batch_size == run.rcp_batch_size, run.path
                assert (run.rcp_point is None) == bool(not_converged), run.path
                if not not_converged:
                    assert run.rcp_point == point, run.path
    finally:
        logging.disable(logging.NOTSET)


def test_progress_units_per_benchmark(all_entries):
    by_benchmark = {e.benchmark: e for e in all_entries if e.context.org == "Dell"}
    unet3d = by_benchmark["unet3d"]
    # unet3d logs its batch size after run_start, and counts samples in epoch_num
    assert {r.rcp_batch_size for r in unet3d.runs} == {56}
    assert all(r.rcp_point % 168 == 0 for r in unet3d.runs)  # whole epochs of 168 samples
    sd = by_benchmark["stable_diffusion"]
    assert {r.rcp_point for r in sd.runs} <= {4000.0, 5000.0, 6000.0}  # step_num of a FID/CLIP pass
    assert 0 < by_benchmark["dlrm_dcnv2"].runs[0].rcp_point < 1  # fractional epochs


def test_bert_train_samples_and_epoch_num_agree(all_entries):
    # the summarizer reads bert's epoch_num; the package checker's --rcp_bert_train_samples reads
    # train_samples: in every bert log here both say the same, so both readings give one verdict
    for entry in all_entries:
        if entry.benchmark != "bert":
            continue
        for run in entry.runs:
            text = run.path.read_text()
            samples = re.findall(r'"key": "train_samples", "value": (\d+)', text)
            if run.rcp_point is not None:
                assert float(samples[-1]) == run.rcp_point, run.path
