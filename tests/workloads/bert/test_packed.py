"""Packed BERT rows (NVIDIA's layout: several sequences a row): the model gives the same loss,
masked-LM accuracy and gradients as with each sequence in its own padded row, an unpacked batch
gives the loss it gave before packing existed, and bert-large's sample data is read packed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from trainclock.errors import DataError
from trainclock.workloads.bert.data import hdf5
from trainclock.workloads.bert.data.batches import as_tensors
from trainclock.workloads.bert.data.sample import write_sample
from trainclock.workloads.bert.model import build_model
from trainclock.workloads.bert.spec import BertShape, get_member

SEQ, PRED, VOCAB = 64, 8, 200
SHAPE = BertShape(n_layer=2, hidden=32, n_head=2, intermediate=64, vocab_size=VOCAB, max_positions=SEQ)


def sequences(lengths: list[int], seed: int = 0) -> dict[str, np.ndarray]:
    """Unpacked instances of these lengths: [CLS] A [SEP] B [SEP], a few predictions each."""
    rng = np.random.default_rng(seed)
    n = len(lengths)
    out = {k: np.zeros((n, SEQ), np.int64) for k in ("input_ids", "input_mask", "segment_ids")}
    out |= {k: np.zeros((n, PRED), np.int64) for k in ("masked_lm_positions", "masked_lm_ids")}
    out["masked_lm_weights"] = np.zeros((n, PRED), np.float32)
    for i, length in enumerate(lengths):
        out["input_ids"][i, :length] = rng.integers(5, VOCAB, size=length)
        out["input_mask"][i, :length] = 1
        out["segment_ids"][i, length // 2:length] = 1
        count = min(PRED, max(1, length // 6))
        where = np.sort(rng.choice(np.arange(1, length - 1), size=count, replace=False))
        out["masked_lm_positions"][i, :count] = where
        out["masked_lm_ids"][i, :count] = rng.integers(5, VOCAB, size=count)
        out["masked_lm_weights"][i, :count] = 1
    out["next_sentence_labels"] = rng.integers(0, 2, size=n)
    return out


def packed_of(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    packed = hdf5.pack(arrays, PRED, per_pack=3)
    packed["masked_lm_weights"] = (packed["masked_lm_positions"] != 0).astype(np.float32)
    return packed


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(SHAPE, dropout=0.0).double()  # float64: the two layouts agree to rounding


def run(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    model.zero_grad()
    loss, correct, count = model(**batch)
    loss.backward()
    grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    return loss.detach(), correct, count, grads


def test_packed_rows_give_the_loss_accuracy_and_gradients_of_one_sequence_a_row(model):
    arrays = sequences([20, 13, 25, 9, 30, 17, 11, 40, 30])  # rows of 3, 3, 2 and 1 sequences
    packed = packed_of(arrays)
    assert packed["next_sentence_weights"].sum(1).tolist() == [3, 3, 2, 1]
    one_a_row, packs = run(model, as_tensors(arrays)), run(model, as_tensors(packed))
    for name, a, b in zip(("loss", "correct", "count", "gradients"), one_a_row, packs):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6, msg=name)
    assert float(one_a_row[2]) == arrays["masked_lm_weights"].sum()  # every prediction counted once


def test_an_unpacked_batch_gives_the_loss_of_bert_with_a_padding_mask(model):
    """Before packing, the model passed input_mask to transformers as a padding mask and averaged
    over rows; the block-diagonal path gives the same loss and hits on one-sequence rows."""
    batch = as_tensors(sequences([64, 13, 40, 7], seed=2))
    loss, correct, _ = model(**batch)
    out = model.bert(input_ids=batch["input_ids"], attention_mask=batch["input_mask"],
                     token_type_ids=batch["segment_ids"])
    hidden = out.last_hidden_state
    where = batch["masked_lm_positions"].unsqueeze(-1).expand(-1, -1, hidden.size(-1))
    mlm_logits, nsp_logits = model.cls(hidden.gather(1, where), out.pooler_output)
    weights = batch["masked_lm_weights"]
    token_loss = F.cross_entropy(mlm_logits.float().transpose(1, 2), batch["masked_lm_ids"], reduction="none")
    before = ((token_loss * weights).sum(1) / weights.sum(1).clamp(min=1)).mean()
    before = before + F.cross_entropy(nsp_logits.float(), batch["next_sentence_labels"])
    torch.testing.assert_close(loss, before, rtol=1e-6, atol=1e-7)
    assert float(correct) == float(((mlm_logits.argmax(-1) == batch["masked_lm_ids"]).float() * weights).sum())


def test_bert_large_sample_shards_are_read_packed(tmp_path):
    data = write_sample(get_member("bert-large"), tmp_path, samples=40, seed=1)
    shards = sorted(p for p in Path(data).rglob("*.hdf5") if "eval" not in str(p.relative_to(data)))
    train = hdf5.read_instances(shards, 76, keep_packed=True)
    assert train["next_sentence_weights"].sum() == 40 and len(train["input_ids"]) < 40
    assert train["positions"].shape == (len(train["input_ids"]), 512) and train["input_mask"].max() >= 2
    assert train["next_sentence_labels"].shape == train["next_sentence_weights"].shape == (len(train["input_ids"]), 3)
    batch = as_tensors(train)
    assert batch["next_sentence_weights"].dtype == torch.float32 and batch["positions"].dtype == torch.int64


def test_unpacked_shards_read_packed_are_packs_of_one(tmp_path):
    arrays = sequences([20, 9])
    hdf5.write_instances(tmp_path / "one.hdf5", arrays)
    hdf5.write_packed(tmp_path / "three.hdf5", hdf5.pack(sequences([10, 12, 14], seed=1), PRED, per_pack=3))
    got = hdf5.read_instances([tmp_path / "one.hdf5", tmp_path / "three.hdf5"], PRED, keep_packed=True)
    assert got["next_sentence_weights"].tolist() == [[1, 0, 0], [1, 0, 0], [1, 1, 1]]
    assert got["positions"][0, :21].tolist() == list(range(20)) + [0]
    assert got["masked_lm_positions"].shape == (3, PRED + 3)


def test_a_damaged_packed_shard_read_packed_is_one_line(tmp_path):
    packed = hdf5.pack(sequences([10, 12, 14]), PRED, per_pack=3)
    packed["next_sentence_positions"][0, 2] += 1  # sequence 3 no longer starts where its mask does
    hdf5.write_packed(tmp_path / "train.hdf5", packed)
    with pytest.raises(DataError, match="packed row 0 sequence 3 does not start at its next_sentence_position"):
        hdf5.read_instances([tmp_path / "train.hdf5"], PRED, keep_packed=True)
