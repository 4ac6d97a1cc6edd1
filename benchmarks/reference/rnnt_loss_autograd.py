"""trainclock's RNN-T loss before its gradient was written out (commit d6126d7): the same
forward recursion over frames, differentiated by autograd. The reference that
benchmarks/rnnt_loss_speed.py times the current loss against, on the same inputs."""

from __future__ import annotations

import torch

_FLOOR = -1e4


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
