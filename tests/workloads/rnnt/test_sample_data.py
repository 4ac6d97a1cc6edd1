"""write_sample_data: made-up LibriSpeech in the published layout that rnnt-librispeech's job reads
on the meta device (what benchmarks/host_pipeline.py times), with LibriSpeech's utterance lengths,
FLAC sizes and transcript lengths, and batches of raw audio that make the closed config's features."""

from __future__ import annotations

import math

import numpy as np
import soundfile
import torch

from trainclock.distributed.context import single_process
from trainclock.distributed.layout import Layout
from trainclock.workload.base import RunSettings
from trainclock.workloads.rnnt import WORKLOAD
from trainclock.workloads.rnnt.data.librispeech import read_split
from trainclock.workloads.rnnt.features import features
from trainclock.workloads.rnnt.spec import get_member

META = torch.device("meta")
SMALLEST_BATCH = 512  # the smallest global batch with reference hyperparameters (RCPs): the job needs as many


def build(member: str, data: str, gbs: int | None):
    settings = RunSettings(data=data, global_batch_size=gbs)
    spec = WORKLOAD.resolve(member, settings, Layout(), META)
    return spec, WORKLOAD.build_job(spec, single_process(), META, 3, settings)


def test_full_size_sample_is_librispeech_as_published_and_batches_as_the_closed_config(tmp_path):
    data = WORKLOAD.write_sample_data("rnnt-librispeech", tmp_path, SMALLEST_BATCH, seed=0)
    root = tmp_path / "LibriSpeech"
    flacs = sorted((root / "train-clean-100").glob("*/*/*.flac"))
    assert len(flacs) == SMALLEST_BATCH and len(list((root / "dev-clean").glob("*/*/*.flac"))) == 1
    speaker, chapter, _ = flacs[0].stem.split("-")
    assert flacs[0].parent == root / "train-clean-100" / speaker / chapter
    assert (flacs[0].parent / f"{speaker}-{chapter}.trans.txt").read_text().split()[1].isupper()
    assert (tmp_path / "sentencepieces" / "librispeech1023.model").is_file()
    info = soundfile.info(str(flacs[0]))
    assert (info.samplerate, info.channels, info.subtype) == (16_000, 1, "PCM_16")
    durations = np.array([u.duration for u in read_split(root / "train-clean-100")])
    assert abs(durations.mean() - 12.3) < 0.6 and durations.max() <= 16.7
    assert 10e3 < sum(f.stat().st_size for f in flacs) / durations.sum() < 30e3  # LibriSpeech's FLAC: ~17 KB/s

    spec, job = build("rnnt-librispeech", data, SMALLEST_BATCH)
    assert job.global_batch_size == SMALLEST_BATCH and job.division == "closed"
    k = 4
    batch = job.batch(0, slice(0, k))
    assert batch["audio"].dtype == torch.int16 and batch["audio"].size(1) == int(batch["audio_lens"].max())
    feats, feat_lens = features(batch, spec.features)  # what the job's loss computes on the device
    # 80 log-mels every 10 ms, 3 stacked and every 3rd kept; up to 16.7 s slowed by 0.85 at most
    longest = math.ceil(spec.max_duration / spec.features.speed_min * 100 / 3)
    assert feats.dtype == torch.float32 and feats.shape[0] == k
    assert feats.shape[2] == 240 == spec.model.in_features and feats.shape[1] <= longest
    assert feat_lens.dtype == torch.int64 and feat_lens.max() == feats.shape[1]
    assert batch["labels"].dtype == torch.int64 and batch["labels"].shape == (k, int(batch["label_lens"].max()))
    assert 0 <= int(batch["labels"].min()) and int(batch["labels"].max()) < spec.model.vocab
    assert 20 < float(batch["label_lens"].float().mean()) < 80  # LibriSpeech: 45 pieces per 12.3 s


def test_a_tier_reads_its_sample_through_the_same_path(tmp_path):
    spec = get_member("rnnt-tiny")
    data = WORKLOAD.write_sample_data("rnnt-tiny", tmp_path, 64, seed=1)
    assert not (tmp_path / "sentencepieces").exists()  # a tier's small model is trained from the transcripts
    _, job = build("rnnt-tiny", data, None)
    batch = job.batch(0, slice(0, 2))
    assert features(batch, spec.features)[0].shape[::2] == (2, spec.model.in_features)
    assert int(batch["labels"].max()) < spec.model.vocab
