"""The RNN-T (transducer) loss in plain PyTorch (torchaudio has no release for this torch).

The loss of one utterance is -log P(y | x), summed over every alignment of its U labels to its T
encoder frames: the log-space forward variable alpha over the (T x U+1) lattice,
    alpha[t, u] = logaddexp(alpha[t-1, u] + blank[t-1, u], alpha[t, u-1] + emit[t, u-1]),
    log P = alpha[T-1, U] + blank[T-1, U],
where blank[t, u] and emit[t, u] are the log-probabilities of the blank and of label u+1 at lattice
point (t, u). The recursion runs over t only: within a frame the emissions chain along u, which a
cumulative sum of emit and a logcumsumexp turn into one vectorised step (exact up to float
rounding; the test compares it with a brute-force sum over all alignments). Gradients via autograd.

Memory: the joint's logits are (B, T, U+1, V); at full size (B=16 per step on one GPU, T~280 frames
after stacking, U~130 pieces, V=1024) that is 2.4 GB in fp32 and several times that with the
softmax and the joint's hidden layer kept for backward. `joint_log_probs` therefore runs the joint
in chunks of utterances under activation checkpointing and keeps only the two log-probabilities the
lattice uses (blank and the next label: 2 x B x T x (U+1) floats, 38 MB at that size); the chunk's
full logits live only while it is computed, again during backward."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.checkpoint import checkpoint

_FLOOR = -1e4  # log-probability of the unreachable lattice columns


def lattice_log_probs(logits_BTUV: torch.Tensor, targets_BU: torch.Tensor, blank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(blank_BTU, emit_BTU) from joint logits of shape (B, T, U+1, V); emit[..., u] is the
    log-probability of targets[:, u] (the last column, past the labels, is unused)."""
    log_probs = logits_BTUV.to(torch.promote_types(logits_BTUV.dtype, torch.float32)).log_softmax(-1)
    blank_BTU = log_probs[..., blank]
    labels = torch.nn.functional.pad(targets_BU, (0, 1), value=0)  # (B, U+1): a dummy label at U
    index = labels[:, None, :, None].expand(-1, log_probs.size(1), -1, 1)
    emit_BTU = log_probs.gather(-1, index).squeeze(-1)
    return blank_BTU, emit_BTU


def joint_log_probs(joint: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], f_BTH: torch.Tensor,
                    g_BUH: torch.Tensor, targets_BU: torch.Tensor, blank: int, chunk: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """lattice_log_probs of joint(f, g), `chunk` utterances at a time, recomputed in backward."""
    blanks, emits = [], []
    for i in range(0, f_BTH.size(0), chunk):
        part = (f_BTH[i:i + chunk], g_BUH[i:i + chunk], targets_BU[i:i + chunk])
        if torch.is_grad_enabled() and f_BTH.size(0) > chunk:
            b, e = checkpoint(_chunk, joint, *part, blank, use_reentrant=False)
        else:
            b, e = _chunk(joint, *part, blank)
        blanks.append(b)
        emits.append(e)
    return torch.cat(blanks), torch.cat(emits)


def _chunk(joint, f_BTH, g_BUH, targets_BU, blank: int):
    return lattice_log_probs(joint(f_BTH, g_BUH), targets_BU, blank)


def transducer_loss(blank_BTU: torch.Tensor, emit_BTU: torch.Tensor, frames_B: torch.Tensor,
                    labels_B: torch.Tensor) -> torch.Tensor:
    """-log P(y | x) per utterance (B,), from the lattice log-probabilities; frames_B and labels_B
    are each utterance's T and U (padding beyond them is ignored)."""
    B, T, U1 = blank_BTU.shape
    emit_BTU = emit_BTU.double() if blank_BTU.dtype == torch.float64 else emit_BTU.float()
    blank_BTU = blank_BTU.to(emit_BTU.dtype)
    u_index = torch.arange(U1, device=blank_BTU.device)
    # columns past an utterance's U are never read; a finite floor there (not -inf) keeps every
    # alpha finite, so logcumsumexp's backward never meets -inf - -inf
    emit_BTU = emit_BTU.masked_fill(u_index[None, None, :] >= labels_B[:, None, None], _FLOOR)
    # C[t, u] = sum of emit[t, 0..u-1]: the cost of emitting labels 1..u within frame t
    cum_BTU = torch.nn.functional.pad(emit_BTU[..., :-1].cumsum(-1), (1, 0))
    alphas = []
    entry_BU = torch.full((B, U1), float("-inf"), dtype=emit_BTU.dtype, device=emit_BTU.device)
    entry_BU[:, 0] = 0.0
    for t in range(T):
        if t > 0:
            entry_BU = alphas[-1] + blank_BTU[:, t - 1]
        # alpha[t, u] = logsumexp over u' <= u of entry[u'] + C[u] - C[u']
        alpha_BU = torch.logcumsumexp(entry_BU - cum_BTU[:, t], -1) + cum_BTU[:, t]
        alphas.append(alpha_BU)
    alpha_BTU = torch.stack(alphas, 1)
    batch = torch.arange(B, device=blank_BTU.device)
    last_t = (frames_B - 1).clamp(min=0)
    log_p = alpha_BTU[batch, last_t, labels_B] + blank_BTU[batch, last_t, labels_B]
    return -log_p
