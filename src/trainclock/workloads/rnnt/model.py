"""The reference RNN-T (rnnt/model.py, common/rnn.py): an LSTM encoder (pre_rnn layers, time
stacking by 2, post_rnn layers), a prediction network (embedding of the non-blank pieces, LSTM
layers, a zero "start" input), and a joint network (linear on each side, ReLU, dropout, linear to
the pieces + blank). LSTM forget-gate biases start at 1.0, hidden-hidden ones at 0, and every
weight is scaled by weights_init_scale (0.5 in the reference's train.sh). The blank is the last
class. At full size (240 input features, 1024 hidden, 2+3 encoder layers, 2x512 prediction, joint
512, 1024 classes) it has 49,006,080 parameters."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import torch
from torch import nn

from trainclock.optim.ema import WeightAverage
from trainclock.workloads.rnnt.loss import joint_log_probs


@dataclass(frozen=True)
class RNNTConfig:
    in_features: int = 240
    vocab: int = 1023  # sentencepiece pieces; classes = vocab + 1 (the blank)
    enc_hidden: int = 1024
    enc_pre_layers: int = 2
    enc_post_layers: int = 3
    stack_time: int = 2
    pred_hidden: int = 512
    pred_layers: int = 2
    joint_hidden: int = 512
    enc_dropout: float = 0.1
    pred_dropout: float = 0.3
    joint_dropout: float = 0.3
    forget_gate_bias: float = 1.0
    weights_init_scale: float = 0.5
    joint_chunk: int = 4  # utterances per joint evaluation (memory: see loss.py)

    @property
    def blank(self) -> int:
        return self.vocab


class LSTM(nn.Module):
    """The reference's LSTM: time-major torch LSTM, its initialisation, dropout on the output."""

    def __init__(self, inputs: int, hidden: int, layers: int, dropout: float, config: RNNTConfig) -> None:
        super().__init__()
        self.lstm = nn.LSTM(inputs, hidden, layers, dropout=dropout if layers > 1 else 0.0)  # between layers only
        self.dropout = nn.Dropout(dropout)
        with torch.no_grad():
            for name, p in self.lstm.named_parameters():
                if "bias_ih" in name:
                    p[hidden:2 * hidden].fill_(config.forget_gate_bias)
                if "bias_hh" in name:
                    p[hidden:2 * hidden].zero_()
                p.mul_(config.weights_init_scale)

    def forward(self, x_TBH: torch.Tensor, state=None):
        if x_TBH.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            # oneDNN has no bf16 LSTM primitive for this shape: the CPU runs the recurrence in fp32
            with torch.autocast("cpu", enabled=False):
                y, state = self.lstm(x_TBH.float(), state if state is None else tuple(s.float() for s in state))
        else:
            y, state = self.lstm(x_TBH, state)
        return self.dropout(y), state


def stack_time(x_TBH: torch.Tensor, lens_B: torch.Tensor, factor: int) -> tuple[torch.Tensor, torch.Tensor]:
    seq = [x_TBH] + [nn.functional.pad(x_TBH[i:], (0, 0, 0, 0, 0, min(i, x_TBH.size(0)))) for i in range(1, factor)]
    return torch.cat(seq, 2)[::factor], (lens_B + factor - 1) // factor


class RNNT(nn.Module):
    def __init__(self, config: RNNTConfig, ema_decay: float | None = None) -> None:
        super().__init__()
        c = self.config = config
        self.pre_rnn = LSTM(c.in_features, c.enc_hidden, c.enc_pre_layers, c.enc_dropout, c)
        self.post_rnn = LSTM(c.stack_time * c.enc_hidden, c.enc_hidden, c.enc_post_layers, c.enc_dropout, c)
        self.embed = nn.Embedding(c.vocab, c.pred_hidden)
        self.dec_rnn = LSTM(c.pred_hidden, c.pred_hidden, c.pred_layers, c.pred_dropout, c)
        self.joint_pred = nn.Linear(c.pred_hidden, c.joint_hidden)
        self.joint_enc = nn.Linear(c.enc_hidden, c.joint_hidden)
        self.joint_net = nn.Sequential(nn.ReLU(), nn.Dropout(c.joint_dropout), nn.Linear(c.joint_hidden, c.vocab + 1))
        # the average of the weights the evaluation decodes with: the reference's, from the initial
        # weights at a fixed decay (no warm-up), updated after every optimizer step
        self.ema = WeightAverage(self, ema_decay, warmup=False) if ema_decay is not None else None

    def encode(self, feats_BTF: torch.Tensor, lens_B: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, _ = self.pre_rnn(feats_BTF.transpose(0, 1))
        # zero the frames past each utterance's end, so stacking its last frame reads zeros, as it
        # would alone (the reference reads the padding's LSTM output: its results depend on the batch)
        x = x.masked_fill((torch.arange(x.size(0), device=x.device)[:, None] >= lens_B[None, :])[..., None], 0.0)
        x, lens_B = stack_time(x, lens_B, self.config.stack_time)
        x, _ = self.post_rnn(x)
        return x.transpose(0, 1), lens_B

    def predict(self, labels_BU: torch.Tensor | None, state=None, start: bool = True):
        """(B, U+1, H) with the zero start input first, or one step from labels (B, 1) / None (start)."""
        if labels_BU is None:
            y = torch.zeros(1 if state is None else state[0].size(1), 1, self.config.pred_hidden,
                            device=self.joint_enc.weight.device, dtype=self.joint_enc.weight.dtype)
        else:
            y = self.embed(labels_BU)
        if start and labels_BU is not None:
            y = nn.functional.pad(y, (0, 0, 1, 0))
        g, state = self.dec_rnn(y.transpose(0, 1), state)
        return g.transpose(0, 1), state

    def joint(self, f_BTH: torch.Tensor, g_BUH: torch.Tensor) -> torch.Tensor:
        """(B, T, U, classes) logits."""
        return self.joint_net(self.joint_enc(f_BTH)[:, :, None] + self.joint_pred(g_BUH)[:, None])

    def forward(self, feats_BTF, feat_lens_B, labels_BU):
        """The lattice log-probabilities (blank_BTU, emit_BTU) and the encoder's frame counts."""
        f, lens = self.encode(feats_BTF, feat_lens_B)
        g, _ = self.predict(labels_BU)
        blank, emit = joint_log_probs(self.joint, f, g, labels_BU, self.config.blank, self.config.joint_chunk)
        return blank, emit, lens


@cache  # the planner asks once per candidate layout: building even a meta network costs milliseconds
def parameter_count(config: RNNTConfig) -> int:
    with torch.device("meta"):
        return sum(p.numel() for p in RNNT(config).parameters())
