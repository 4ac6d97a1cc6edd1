"""Packed training batches (data/packing.py, batches.packed_train_batch): every packed micro-batch
holds exactly the sequences of the unpacked path's micro-batch for that step and rank, its loss
and gradients are the unpacked ones, padding rows change nothing, the job trains the same step
either way, and a sequence that cannot fit a row is one UsageError line."""

from __future__ import annotations

import argparse
from contextlib import nullcontext
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
import torch

from trainclock.distributed.context import single_process
from trainclock.distributed.layout import Layout
from trainclock.errors import UsageError
from trainclock.train.step import train_step
from trainclock.workload.base import RunSettings
from trainclock.workload.batches import TreeBatch
from trainclock.workloads.bert import WORKLOAD
from trainclock.workloads.bert.data.batches import (PackedBatches, PackedStep, as_tensors, model_inputs,
                                                    packed_train_batch, train_batch)
from trainclock.workloads.bert.data.official import load_folder
from trainclock.workloads.bert.data.packing import ROW_BUCKETS, bucket_rows, pack
from trainclock.workloads.bert.data.sample import instances, write_sample
from trainclock.workloads.bert.model import build_model
from trainclock.workloads.bert.spec import BertShape, get_member

SEQ, PRED, SEED, GBS, MICRO = 512, 76, 7, 32, 8
SHAPE = BertShape(n_layer=1, hidden=16, n_head=1, intermediate=32, vocab_size=30522)


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> tuple[str, dict[str, torch.Tensor]]:
    """bert-large's sample data (packed HDF5 shards, the real set's lengths) as the job reads it."""
    folder = write_sample(get_member("bert-large"), tmp_path_factory.mktemp("sample"), samples=120, seed=3)
    return folder, as_tensors(load_folder(folder, SEQ, PRED)[0])


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(SHAPE, dropout=0.0).double()


def sequence_key(ids, segments, positions, predicted, weights, label) -> tuple:
    return (tuple(ids), tuple(segments), tuple(zip(positions, predicted, weights)), int(label))


def unpacked_keys(batch: dict[str, torch.Tensor]) -> list[tuple]:
    keys = []
    for i in range(len(batch["input_ids"])):
        n = int(batch["input_mask"][i].sum())
        used = batch["masked_lm_weights"][i] != 0
        keys.append(sequence_key(batch["input_ids"][i, :n].tolist(), batch["segment_ids"][i, :n].tolist(),
                                 batch["masked_lm_positions"][i][used].tolist(),
                                 batch["masked_lm_ids"][i][used].tolist(), batch["masked_lm_weights"][i][used].tolist(),
                                 batch["next_sentence_labels"][i]))
    return keys


def packed_keys(rows: dict[str, torch.Tensor]) -> list[tuple]:
    """The sequences of packed rows, read back from the layout alone (each one span starting at its
    next_sentence_position, positions restarting at 0, its predictions inside it)."""
    keys = []
    for r, k in torch.nonzero(rows["next_sentence_weights"]).tolist():
        span = torch.nonzero(rows["input_mask"][r] == k + 1).flatten()
        start, n = int(span[0]), len(span)
        assert span.tolist() == list(range(start, start + n)) and start == int(rows["next_sentence_positions"][r, k])
        assert rows["positions"][r, start:start + n].tolist() == list(range(n))
        where = rows["masked_lm_positions"][r]
        mine = (rows["masked_lm_weights"][r] != 0) & (where >= start) & (where < start + n)
        keys.append(sequence_key(rows["input_ids"][r, start:start + n].tolist(),
                                 rows["segment_ids"][r, start:start + n].tolist(), (where[mine] - start).tolist(),
                                 rows["masked_lm_ids"][r][mine].tolist(), rows["masked_lm_weights"][r][mine].tolist(),
                                 rows["next_sentence_labels"][r, k]))
    used = int((rows["masked_lm_weights"] != 0).sum())
    assert used == sum(len(key[2]) for key in keys)  # no prediction outside a sequence
    return keys


def expected_ids(n: int, step: int, rows: slice) -> np.ndarray:
    """The training set's rows the unpacked path draws for this step and rank (train_batch's draw)."""
    return np.random.default_rng([SEED, step]).choice(n, size=GBS, replace=GBS > n)[rows]


@pytest.mark.parametrize("ranks", [1, 2])
def test_each_packed_micro_batch_holds_the_unpacked_micro_batchs_sequences(sample, ranks):
    _, train = sample
    ids_of = {}
    for i, key in enumerate(unpacked_keys(train)):
        ids_of.setdefault(key, i)
    assert len(ids_of) == len(train["input_ids"])  # every sample sequence is told apart by its contents
    per = GBS // ranks
    for step in (0, 5):
        everyone = Counter()
        for rank in range(ranks):
            rows = slice(rank * per, (rank + 1) * per)
            packed = packed_train_batch(train, SEED, step, GBS, rows, MICRO, SEQ, PRED)
            unpacked = train_batch(train, SEED, step, GBS, rows)
            assert packed.counts == (MICRO,) * (per // MICRO)
            wanted = expected_ids(len(train["input_ids"]), step, rows)
            for m, micro in enumerate(PackedBatches().micro_batches(packed, MICRO)):
                got = Counter(ids_of[key] for key in packed_keys(micro.inputs()))
                assert got == Counter(wanted[m * MICRO:(m + 1) * MICRO].tolist())
                assert got == Counter(ids_of[k] for k in unpacked_keys(TreeBatch().micro_batches(unpacked, MICRO)[m]))
                assert len(micro.inputs()["input_ids"]) < MICRO  # fewer rows than sequences on this data
            everyone += Counter(ids_of[key] for micro in packed.micro for key in packed_keys(micro))
        assert everyone == Counter(expected_ids(len(train["input_ids"]), step, slice(None)).tolist())


def grads(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


def step_of(model: torch.nn.Module, micro_batches: list) -> tuple[torch.Tensor, ...]:
    """The loop's accumulation: each micro-batch's mean loss over the count of micro-batches."""
    model.zero_grad()
    total, correct, count = torch.zeros((), dtype=torch.float64), 0.0, 0.0
    for micro in micro_batches:
        loss, hits, masked = model(**model_inputs(micro))
        (loss / len(micro_batches)).backward()
        total, correct, count = total + loss.detach() / len(micro_batches), correct + hits, count + masked
    return total, torch.as_tensor(correct), torch.as_tensor(count), grads(model)


def test_a_packed_step_has_the_unpacked_loss_accuracy_and_gradients(sample, model):
    _, train = sample
    unpacked = TreeBatch().micro_batches(train_batch(train, SEED, 3, GBS), MICRO)
    packed_step = packed_train_batch(train, SEED, 3, GBS, slice(None), MICRO, SEQ, PRED)
    packed = PackedBatches().micro_batches(packed_step, MICRO)
    for name, a, b in zip(("loss", "correct", "count", "gradients"), step_of(model, unpacked), step_of(model, packed)):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-7, msg=name)


def test_padding_rows_change_nothing(sample, model):
    _, train = sample
    sequences = {k: v[:MICRO] for k, v in train.items()}
    with pytest.raises(ValueError, match="need"):  # fewer rows than the sequences need: refused
        pack(sequences, SEQ, PRED, rows=1)
    base = pack(sequences, SEQ, PRED)
    needed = int((base["next_sentence_weights"].sum(1) > 0).sum())
    exact, padded = pack(sequences, SEQ, PRED, rows=needed), pack(sequences, SEQ, PRED, rows=needed + 3)
    assert len(padded["input_ids"]) == needed + 3
    for key, value in padded.items():
        assert not value[needed:].any(), key  # an empty row: no token, prediction or sequence
        assert torch.equal(value[:needed], exact[key]), key
    for name, a, b in zip(("loss", "correct", "count", "gradients"), step_of(model, [exact]), step_of(model, [padded])):
        torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-9, msg=name)


def test_row_counts_are_padded_to_few_buckets_that_never_hold_less_than_needed(sample):
    _, train = sample
    for micro in (8, 32):
        counts = set()
        for step in range(12):
            for rows in packed_train_batch(train, SEED, step, 32, slice(None), micro, SEQ, PRED).micro:
                need = int((rows["next_sentence_weights"].sum(1) > 0).sum())
                counts.add(len(rows["input_ids"]))
                assert need <= len(rows["input_ids"]) == bucket_rows(need, micro) <= micro
        assert all(c % -(-micro // ROW_BUCKETS) == 0 or c == micro for c in counts) and len(counts) <= ROW_BUCKETS
    assert [bucket_rows(n, 32) for n in (1, 4, 5, 17, 32)] == [4, 4, 8, 20, 32]


def test_a_sequence_longer_than_max_seq_length_is_one_usage_error_line():
    arrays = instances(4, 64, 20, 2048, np.random.default_rng(0))  # rows of 128 holding sequences of at most 64
    arrays = as_tensors({k: np.pad(v, ((0, 0), (0, 64))) if k in ("input_ids", "input_mask", "segment_ids") else v
                         for k, v in arrays.items()})
    arrays["input_mask"][2, :100] = 1
    with pytest.raises(UsageError) as e:
        pack(arrays, 64, 20)
    assert "\n" not in str(e.value) and "more than max_seq_length 64" in str(e.value)
    assert str(e.value).startswith("sequence 2 of the batch holds 100 tokens")


def test_a_cut_through_a_packed_micro_batch_is_refused(sample):
    _, train = sample
    packed = packed_train_batch(train, SEED, 0, GBS, slice(None), MICRO, SEQ, PRED)
    assert PackedBatches().rows(packed, slice(MICRO, 3 * MICRO)).counts == (MICRO, MICRO)
    assert PackedBatches().size(packed) == GBS
    with pytest.raises(ValueError, match="cut a packed micro-batch"):
        PackedBatches().rows(packed, slice(0, MICRO // 2))
    both = PackedStep(packed.micro[:2], packed.counts[:2]).inputs()  # two micro-batches in one forward
    assert len(both["input_ids"]) == sum(len(m["input_ids"]) for m in packed.micro[:2])


def test_the_flag_packs_bert_large_by_default_and_the_cpu_tiers_on_request():
    parser = argparse.ArgumentParser()
    WORKLOAD.add_arguments(parser.add_argument_group())
    assert parser.parse_args([]).pack_sequences is None
    meta = torch.device("meta")
    for member, default in (("bert-large", True), ("bert-tiny", False), ("bert-mini", False)):
        assert WORKLOAD.resolve(member, RunSettings(), Layout(), meta).pack_sequences is default
        flipped = vars(parser.parse_args(["--no-pack-sequences" if default else "--pack-sequences"]))
        assert WORKLOAD.resolve(member, RunSettings(extra=flipped), Layout(), meta).pack_sequences is not default


def test_the_job_trains_the_same_steps_packed_and_unpacked(sample, tmp_path):
    """Through the workload and the loop's train_step: a narrow bert-large (its batch cut to 32, no
    dropout) from one start checkpoint, two steps packed and two unpacked, on the sample data."""
    folder, _ = sample
    spec = replace(get_member("bert-large"), shape=SHAPE, global_batch_size=GBS, micro_batch_size=MICRO,
                   learning_rate=1e-2, warmup_steps=0, start_warmup_step=0, dropout=0.0)
    start = tmp_path / "start.pt"
    torch.manual_seed(1)
    torch.save(build_model(SHAPE, 0.0).state_dict(), start)
    settings = RunSettings(data=folder, extra={"init_checkpoint": str(start)})
    cpu, ctx = torch.device("cpu"), single_process()
    losses = {}
    for packed in (True, False):
        job = WORKLOAD.build_job(replace(spec, pack_sequences=packed), ctx, cpu, SEED, settings)
        assert isinstance(job.batch(0, slice(0, GBS)), PackedStep) is packed
        optimizer = job.optimizer.build(job.model)
        for group in optimizer.param_groups:
            group["lr"] = spec.learning_rate
        batches = [job.batch(s, slice(0, GBS)) for s in range(2)]
        losses[packed] = [float(train_step(job, optimizer, b, MICRO, nullcontext, cpu, ctx)[0]) for b in batches]
    assert losses[True] == pytest.approx(losses[False], rel=1e-5)


def test_a_packed_runs_flops_count_the_rows_it_computes(tmp_path, monkeypatch):
    """MFU of a packed run: a sequence costs its share of a 512-token row, not a whole row."""
    from trainclock.distributed.context import single_process
    from trainclock.distributed.layout import Layout
    from trainclock.workload.base import RunSettings
    from trainclock.workloads.bert import WORKLOAD

    monkeypatch.delenv("TRAINCLOCK_BERT_INIT_CHECKPOINT", raising=False)
    data = WORKLOAD.write_sample_data("bert-large", tmp_path, samples=40, seed=1)
    meta = torch.device("meta")

    def job(pack: bool):
        settings = RunSettings(data=str(data), extra={"pack_sequences": pack})
        spec = WORKLOAD.resolve("bert-large", settings, Layout(), meta)
        return WORKLOAD.build_job(spec, single_process(), meta, 3, settings)

    packed, unpacked = job(True), job(False)
    share = packed.flops_per_sample / unpacked.flops_per_sample
    gbs = packed.global_batch_size
    rows = [len(m["input_ids"]) for step in range(4) for m in packed.batch(step, slice(0, gbs)).micro]
    assert share == pytest.approx(sum(rows) / (4 * gbs)) and share < 0.8
