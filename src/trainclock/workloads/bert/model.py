"""BERT for pre-training: transformers' BertForPreTraining, built from a config (never downloaded),
with the reference's forward: the masked-LM head runs on the gathered masked positions only (at
most 76 of 512 tokens), not on every token. Parameter names stay those of BertForPreTraining, so a
start checkpoint converted from the reference (NVIDIA's state dict) loads by name.

Rows may be packed (NVIDIA's packed HDF5: several sequences a 512-token row, input_mask holding
each token's sequence index 1, 2, 3 and 0 for padding): each token attends within its own sequence
only, takes its position within it, and next-sentence prediction runs at each sequence's [CLS].
An unpacked row is a pack of one sequence (input_mask 1), so both take the same code path."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import BertConfig, BertForPreTraining

from trainclock.errors import DataError
from trainclock.workloads.bert.spec import BertShape


def bert_config(shape: BertShape, dropout: float) -> BertConfig:
    # sdpa: the block-diagonal mask below is boolean, which eager attention would add as numbers
    return BertConfig(vocab_size=shape.vocab_size, hidden_size=shape.hidden, num_hidden_layers=shape.n_layer,
                      num_attention_heads=shape.n_head, intermediate_size=shape.intermediate,
                      max_position_embeddings=shape.max_positions, type_vocab_size=2,
                      hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout, attn_implementation="sdpa")


def block_diagonal(sequence_BT: torch.Tensor) -> torch.Tensor:
    """(B, 1, T, T) boolean mask for SDPA: token i attends j iff both are in the same sequence.
    Padding (index 0) attends padding: a query row with no key at all makes SDPA return NaN, and
    later layers would spread it (0 attention weight times a NaN value is NaN); padding outputs
    are never read. A 4D mask reaches transformers' SDPA as given (no (B, H, T, T) copy)."""
    return (sequence_BT.unsqueeze(2) == sequence_BT.unsqueeze(1)).unsqueeze(1)


class BertPretraining(BertForPreTraining):
    def forward(self, input_ids: torch.Tensor, segment_ids: torch.Tensor, input_mask: torch.Tensor,
                masked_lm_positions: torch.Tensor, masked_lm_ids: torch.Tensor, masked_lm_weights: torch.Tensor,
                next_sentence_labels: torch.Tensor, positions: torch.Tensor | None = None,
                next_sentence_positions: torch.Tensor | None = None,
                next_sentence_weights: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(loss, correct, count): the masked-LM plus next-sentence loss, and the masked-LM hits and
        predictions of this batch (summed across ranks for the accuracy). Packed rows add
        positions [B, T] and next_sentence_positions/weights [B, K] (labels then [B, K]); without
        them a row is one sequence at positions 0.., its [CLS] at 0."""
        rows = input_ids.size(0)
        if next_sentence_positions is None:
            next_sentence_positions = torch.zeros(rows, 1, dtype=torch.long, device=input_ids.device)
        if next_sentence_weights is None:
            next_sentence_weights = torch.ones(next_sentence_positions.shape, device=input_ids.device)
        sequence_BT = input_mask.long()
        out = self.bert(input_ids=input_ids, attention_mask=block_diagonal(sequence_BT), token_type_ids=segment_ids,
                        position_ids=None if positions is None else positions.long())
        hidden_BTD = out.last_hidden_state
        width = hidden_BTD.size(-1)
        masked_BPD = hidden_BTD.gather(1, masked_lm_positions.long().unsqueeze(-1).expand(-1, -1, width))
        cls_BKD = hidden_BTD.gather(1, next_sentence_positions.long().unsqueeze(-1).expand(-1, -1, width))
        # the pooler on every sequence's [CLS], not only position 0 (out.pooler_output: one h x h matmul a row, unused)
        pooled_BKD = self.bert.pooler(cls_BKD.flatten(0, 1).unsqueeze(1)).view(rows, -1, width)
        mlm_logits_BPV, nsp_logits_BK2 = self.cls(masked_BPD, pooled_BKD)
        weights_BP = masked_lm_weights.float()
        present_BK = next_sentence_weights.float()
        sequences = present_BK.sum().clamp(min=1)
        token_loss_BP = F.cross_entropy(mlm_logits_BPV.float().transpose(1, 2), masked_lm_ids.long(), reduction="none")
        # a mean over sequences of each one's mean over its masked positions: the same loss and
        # gradient however the batch is cut into micro-batches and ranks (a mean over all masked
        # positions of a micro-batch would weight ranks by their count of predictions), and the
        # same whether the sequences come packed or one a row
        owner_BP = sequence_BT.gather(1, masked_lm_positions.long())  # the sequence each prediction is in
        index_K = torch.arange(1, present_BK.size(1) + 1, device=owner_BP.device)
        mine_BPK = (owner_BP.unsqueeze(-1) == index_K).float() * weights_BP.unsqueeze(-1)
        per_sequence_BK = (token_loss_BP.unsqueeze(-1) * mine_BPK).sum(1) / mine_BPK.sum(1).clamp(min=1)
        mlm_loss = (per_sequence_BK * present_BK).sum() / sequences
        nsp_BK = F.cross_entropy(nsp_logits_BK2.float().flatten(0, 1), next_sentence_labels.long().flatten(),
                                 reduction="none").view(rows, -1)
        nsp_loss = (nsp_BK * present_BK).sum() / sequences
        count = weights_BP.sum()
        correct = ((mlm_logits_BPV.argmax(-1) == masked_lm_ids).float() * weights_BP).sum()
        return mlm_loss + nsp_loss, correct.detach(), count.detach()


def build_model(shape: BertShape, dropout: float) -> BertPretraining:
    return BertPretraining(bert_config(shape, dropout))


def load_start_checkpoint(model: torch.nn.Module, path: Path) -> None:
    """Load a torch state dict by parameter name (a plain dict, or NVIDIA's {"model": ...})."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise DataError(f"start checkpoint {path} does not exist; give the path of the phase-1 checkpoint") from None
    except Exception as e:  # torch raises many types for a file that is not a checkpoint
        raise DataError(f"start checkpoint {path} is not a torch state dict ({type(e).__name__}); "
                        "convert the reference checkpoint to a PyTorch state dict") from None
    if isinstance(state, dict) and isinstance(state.get("model"), dict):
        state = state["model"]
    if not isinstance(state, dict):
        raise DataError(f"start checkpoint {path} holds no state dict")
    state = {k.removeprefix("module."): v for k, v in state.items()}
    own = model.state_dict()
    missing = [k for k in own if k not in state and not k.endswith("position_ids")]
    wrong = [k for k in own if k in state and tuple(state[k].shape) != tuple(own[k].shape)]
    if missing or wrong:
        what = f"lacks {missing[0]}" if missing else f"has {wrong[0]} of shape {tuple(state[wrong[0]].shape)}"
        raise DataError(f"start checkpoint {path} does not fit this model: it {what} "
                        f"({len(missing)} missing, {len(wrong)} of another shape)")
    model.load_state_dict({k: v for k, v in state.items() if k in own}, strict=False)
