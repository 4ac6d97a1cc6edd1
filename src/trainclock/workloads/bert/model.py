"""BERT for pre-training: transformers' BertForPreTraining, built from a config (never downloaded),
with the reference's forward: the masked-LM head runs on the gathered masked positions only (at
most 76 of 512 tokens), not on every token. Parameter names stay those of BertForPreTraining, so a
start checkpoint converted from the reference (NVIDIA's state dict) loads by name."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import BertConfig, BertForPreTraining

from trainclock.errors import DataError
from trainclock.workloads.bert.spec import BertShape


def bert_config(shape: BertShape, dropout: float) -> BertConfig:
    return BertConfig(vocab_size=shape.vocab_size, hidden_size=shape.hidden, num_hidden_layers=shape.n_layer,
                      num_attention_heads=shape.n_head, intermediate_size=shape.intermediate,
                      max_position_embeddings=shape.max_positions, type_vocab_size=2,
                      hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)


class BertPretraining(BertForPreTraining):
    def forward(self, input_ids: torch.Tensor, segment_ids: torch.Tensor, input_mask: torch.Tensor,
                masked_lm_positions: torch.Tensor, masked_lm_ids: torch.Tensor, masked_lm_weights: torch.Tensor,
                next_sentence_labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(loss, correct, count): the mean masked-LM plus next-sentence loss, and the masked-LM
        hits and predictions of this batch (summed across ranks for the accuracy)."""
        out = self.bert(input_ids=input_ids, attention_mask=input_mask, token_type_ids=segment_ids)
        hidden_BTD = out.last_hidden_state
        positions_BPD = masked_lm_positions.long().unsqueeze(-1).expand(-1, -1, hidden_BTD.size(-1))
        mlm_logits_BPV, nsp_logits_B2 = self.cls(hidden_BTD.gather(1, positions_BPD), out.pooler_output)
        weights_BP = masked_lm_weights.float()
        token_loss_BP = F.cross_entropy(mlm_logits_BPV.float().transpose(1, 2), masked_lm_ids.long(), reduction="none")
        # a mean over sequences of each one's mean over its masked positions: the same loss and
        # gradient however the batch is cut into micro-batches and ranks (a mean over all masked
        # positions of a micro-batch would weight ranks by their count of predictions)
        per_row_B = (token_loss_BP * weights_BP).sum(1) / weights_BP.sum(1).clamp(min=1)
        mlm_loss = per_row_B.mean()
        count = weights_BP.sum()
        nsp_loss = F.cross_entropy(nsp_logits_B2.float(), next_sentence_labels.long())
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
