"""The CPU tiers' summarisation task and the official parquet loader: prompts in the reference's
template with only the summary scored, deterministic batches a rank can build alone, and bad files
refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainclock.errors import DataError, UsageError
from trainclock.workloads.llama2_70b_lora.data import scrolls
from trainclock.workloads.llama2_70b_lora.data.batches import sample_indices
from trainclock.workloads.llama2_70b_lora.data.task import EOS, Example, encode, examples, speeches
from trainclock.workloads.llama2_70b_lora.model import IGNORE

PLAY = """ACT I. SCENE 1.

HELENA.
And you, monarch!

PAROLLES.
No.

HELENA.
Are you meditating on virginity?
More text.

Exit

KING.
Welcome.
"""


def test_speeches_become_documents_summarised_by_their_speakers(tmp_path):
    assert speeches(PLAY) == [("HELENA", "And you, monarch!"), ("PAROLLES", "No."),
                              ("HELENA", "Are you meditating on virginity?"), ("KING", "Welcome.")]
    (tmp_path / "a.txt").write_text(PLAY * 3)  # 12 speeches: documents of 2 to 5
    found = examples([tmp_path / "a.txt"], seed=0)
    assert found and found[0].document.startswith("HELENA.\nAnd you, monarch!\nPAROLLES.\nNo.")
    assert found[0].summary.startswith("Speakers: HELENA, PAROLLES")


def test_only_the_summary_and_its_end_are_scored():
    inputs, labels = encode(Example("KING.\nWelcome.", "Speakers: KING."), 96)
    assert inputs.shape == labels.shape == (96,)
    scored = labels[labels != IGNORE]
    assert bytes(scored[:-1].tolist()).decode() == "Speakers: KING." and scored[-1] == EOS
    # labels are the next inputs where scored
    at = np.flatnonzero(labels != IGNORE)[:-1]
    assert (labels[at] == inputs[at + 1]).all()
    assert encode(Example("x" * 200, "Speakers: A."), 96) is None  # too long: dropped, as the reference drops


def test_a_rank_builds_its_own_rows_of_each_step_and_epochs_reshuffle():
    whole = sample_indices(10, seed=3, step=1, global_batch_size=8)
    halves = np.concatenate([sample_indices(10, 3, 1, 8, slice(0, 4)), sample_indices(10, 3, 1, 8, slice(4, 8))])
    assert (whole == halves).all()
    epoch = np.concatenate([sample_indices(10, 3, s, 5) for s in range(2)])
    assert sorted(epoch.tolist()) == list(range(10))  # each sample once per epoch
    assert not (sample_indices(10, 4, 0, 5) == sample_indices(10, 3, 0, 5)).all()


def test_official_parquet_round_trips_with_labels_shifted(tmp_path):
    inputs = np.arange(2 * 8).reshape(2, 8)
    labels = inputs.copy()
    labels[:, :5] = IGNORE
    scrolls.write_split(tmp_path, "train", inputs, labels)
    split = scrolls.read_split(tmp_path, "train", 8)
    assert torch.equal(split.inputs.long(), torch.from_numpy(inputs))
    assert split.labels[0].tolist() == [IGNORE] * 4 + [5, 6, 7, IGNORE]


def test_bad_official_data_is_one_line(tmp_path):
    with pytest.raises(UsageError, match="pass --data"):
        scrolls.read_split(tmp_path / "missing", "train", 8)
    with pytest.raises(DataError, match="cannot read"):
        scrolls.read_split(tmp_path, "train", 8)
    scrolls.write_split(tmp_path, "train", np.zeros((1, 4), dtype=np.int64), np.zeros((1, 4), dtype=np.int64))
    with pytest.raises(DataError, match="row 0 has 4 tokens, not the benchmark's 8"):
        scrolls.read_split(tmp_path, "train", 8)
