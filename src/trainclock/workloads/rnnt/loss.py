"""The RNN-T (transducer) loss in plain PyTorch (torchaudio has no release for this torch).

The loss of one utterance is -log P(y | x), summed over every alignment of its U labels to its T
encoder frames: the log-space forward variable alpha over the (T x U+1) lattice,
    alpha[t, u] = logaddexp(alpha[t-1, u] + blank[t-1, u], alpha[t, u-1] + emit[t, u-1]),
    log P = alpha[T-1, U] + blank[T-1, U],
where blank[t, u] and emit[t, u] are the log-probabilities of the blank and of label u+1 at lattice
point (t, u). The recursion runs by anti-diagonals (`_alphas`), beta as the alpha of the lattices
read backwards in the same loop, and the gradient is written out (`_TransducerLoss`); the tests
compare the loss with a brute-force sum over all alignments and the gradient with finite
differences. benchmarks/rnnt_loss_speed.py times it against the recursion differentiated by autograd.

Memory: the joint's logits are (B, T, U+1, V); at full size (B=128 per step on one GPU, T~280 frames
after stacking, U~130 pieces, V=1024) that is 2.4 GB in fp32 and several times that with the
softmax and the joint's hidden layer kept for backward. `joint_log_probs` therefore runs the joint
in chunks of utterances under activation checkpointing and keeps only the two log-probabilities the
lattice uses (blank and the next label: 2 x B x T x (U+1) floats, 38 MB for 16 utterances); the chunk's
full logits live only while it is computed, again during backward."""

from __future__ import annotations

import math
import threading
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
    dtype = torch.float64 if blank_BTU.dtype == torch.float64 else torch.float32
    return _TransducerLoss.apply(blank_BTU.to(dtype), emit_BTU.to(dtype), frames_B, labels_B)


class _TransducerLoss(torch.autograd.Function):
    """The forward-backward algorithm with its gradient written out. Autograd through a loop over
    the lattice would record several small operators per step and replay them all backwards; here
    one loop computes alpha, and beta along with it as the alpha of each utterance's reversed
    lattice (the two stacked into one batch), and the gradient is one vectorised expression
    (Graves 2012, "Sequence transduction with recurrent neural networks", eq. 20):
        d log P / d blank[t, u] = exp(alpha[t, u] + blank[t, u] + beta[t+1, u] - log P)
        d log P / d emit[t, u]  = exp(alpha[t, u] + emit[t, u] + beta[t, u+1] - log P)
    where beta[t, u] is the log-probability of finishing from (t, u), final blank included."""

    @staticmethod
    def forward(ctx, blank_BTU: torch.Tensor, emit_BTU: torch.Tensor, frames_B: torch.Tensor,
                labels_B: torch.Tensor) -> torch.Tensor:
        B, T, U1 = blank_BTU.shape
        u_index = torch.arange(U1, device=blank_BTU.device)
        # columns past an utterance's U are never read; a finite floor there (not -inf) keeps every
        # alpha of the lattice finite, so the gradient meets no -inf - -inf
        emit_BTU = emit_BTU.masked_fill(u_index[None, None, :] >= labels_B[:, None, None], _FLOOR)
        # one more row than the frames: the reversed lattices start from it (below)
        weights = _move_weights(2 * B, T + 1, U1, blank_BTU)
        _lattice_view(weights[0, :B], T + 1, U1)[:, :T].copy_(emit_BTU)
        _lattice_view(weights[1, :B], T + 1, U1)[:, :T].copy_(blank_BTU)
        back_emit_BTU, back_blank_BTU = _reversed_moves(blank_BTU, emit_BTU, frames_B, labels_B)
        _lattice_view(weights[0, B:], T + 1, U1).copy_(back_emit_BTU)
        _lattice_view(weights[1, B:], T + 1, U1).copy_(back_blank_BTU)
        flat_alpha = _alphas(weights, T + 1, U1)
        alpha_BTU = _lattice_view(flat_alpha[:B], T + 1, U1)[:, :T]
        batch_B = torch.arange(B, device=blank_BTU.device)
        final_blank_B = blank_BTU[batch_B, frames_B - 1, labels_B]  # the blank that ends every path
        # beta[t, u] = alpha of the reversed lattice at (T - t, U - u), final blank included; -inf
        # past the utterance, where no path goes
        beta_BTU = _lattice_view(flat_alpha[B:], T + 1, U1)[:, 1:].flip(1, 2)
        t_index = torch.arange(T, device=blank_BTU.device)
        outside_BTU = (t_index[None, :, None] >= frames_B[:, None, None]) | (u_index[None, None, :] > labels_B[:, None, None])
        beta_BTU.masked_fill_(outside_BTU, float("-inf"))
        log_p_B = alpha_BTU[batch_B, frames_B - 1, labels_B] + final_blank_B
        ctx.save_for_backward(blank_BTU, emit_BTU, alpha_BTU, beta_BTU, frames_B, labels_B, log_p_B)
        return -log_p_B

    @staticmethod
    def backward(ctx, grad_B: torch.Tensor):
        blank_BTU, emit_BTU, alpha_BTU, beta_BTU, frames_B, labels_B, log_p_B = ctx.saved_tensors
        centre_BTU = alpha_BTU - log_p_B[:, None, None]
        scale_B11 = -grad_B[:, None, None]
        # after a blank at (t, u) comes beta[t+1, u] (-inf past an utterance's frames)...
        grad_blank = torch.zeros_like(blank_BTU)
        _occupancy(torch.add(centre_BTU[:, :-1], blank_BTU[:, :-1], out=grad_blank[:, :-1]).add_(beta_BTU[:, 1:]), scale_B11)
        # ...except the final blank, which every path takes: d log P / d it = 1
        grad_blank[torch.arange(blank_BTU.size(0), device=blank_BTU.device), frames_B - 1, labels_B] = scale_B11[:, 0, 0]
        # after a label at (t, u) comes beta[t, u+1]; nothing after the last column
        grad_emit = torch.zeros_like(emit_BTU)
        _occupancy(torch.add(centre_BTU[..., :-1], emit_BTU[..., :-1], out=grad_emit[..., :-1]).add_(beta_BTU[..., 1:]), scale_B11)
        return grad_blank, grad_emit, None, None


def _occupancy(log_share: torch.Tensor, scale: torch.Tensor) -> None:
    """log_share <- exp(log_share) * scale, in place. Shares below the square root of the dtype's
    smallest normal number (1e-19 in float32: far below its resolution of the gradient, whose
    shares sum to about 1) are zeroed rather than computed, because the CPU's exp leaves its
    vectorised path where the result is not a normal number (100x slower), and so does the product
    with a scale below 1 (the mean's 1/B) of a share near the smallest normal number."""
    cutoff = math.log(torch.finfo(log_share.dtype).tiny) / 2
    negligible = log_share < cutoff
    log_share.clamp_(min=cutoff).exp_().mul_(scale).masked_fill_(negligible, 0.0)


def _reversed_moves(blank_BTU: torch.Tensor, emit_BTU: torch.Tensor, frames_B: torch.Tensor,
                    labels_B: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The emit and blank log-probabilities of the lattices read backwards, (B, T+1, U+1) each,
    whose alpha is the original's beta: point (t', u') of the reversed lattice is (T - t', U - u')
    of the original padded to T+1 frames and U+1 = U_max+1 columns, its moves the original's moves
    into that point. Read globally (one flip for the batch, no per-utterance shift and so no host
    read of the lengths), an utterance's own end (T_b, U_b) lies at (T - T_b, U - U_b); a path of
    log-weight 0, down column 0 then along row T - T_b, leads there from (0, 0) and is the only
    way to it, so alpha there is exactly 0. Other paths into the utterance's points pass a label
    past its U_b, whose floor (-1e4) makes them vanish in float."""
    B, T, U1 = blank_BTU.shape
    start_B11 = (T - frames_B)[:, None, None]  # the row of each utterance's end
    t_index = torch.arange(T + 1, device=blank_BTU.device)[None, :, None]
    u_index = torch.arange(U1, device=blank_BTU.device)[None, None, :]
    before_end = t_index < start_B11
    # blank from (s, u') is the original's from (T-1-s, U-u'); the last row has none
    back_blank = torch.nn.functional.pad(blank_BTU.flip(1, 2), (0, 0, 0, 1), value=float("-inf"))
    back_blank.masked_fill_(before_end, float("-inf")).masked_fill_(before_end & (u_index == 0), 0.0)
    # label from (t', v) is the original's from (T-t', U-1-v); the first row has none
    back_emit = torch.nn.functional.pad(emit_BTU.flip(1, 2)[..., 1:], (0, 1, 1, 0), value=float("-inf"))
    back_emit.masked_fill_(t_index <= start_B11, float("-inf"))
    back_emit.masked_fill_((t_index == start_B11) & (u_index < U1 - 1 - labels_B[:, None, None]), 0.0)
    return back_emit, back_blank


_cpu_move_weights = threading.local()


def _move_weights(rows: int, T: int, U1: int, like: torch.Tensor) -> torch.Tensor:
    """The buffer _alphas reads the two moves' log-probabilities from, -inf: [0] the labels' emits,
    [1] the blanks, each row a lattice in the flat layout of _alphas (write through _lattice_view).
    On the CPU the last one for the same lattices is handed out again (one per thread): at full
    size it is 110 MB, whose fresh pages take 24 ms to fault in and fill, a sixth of the loss. It
    is never saved for backward, and callers overwrite every lattice point, so the -inf slots off
    the lattices stay as the first fill left them."""
    shape = (2, rows, (T + U1 - 1) * (U1 + 1))
    if like.device.type != "cpu":
        return like.new_full(shape, float("-inf"))
    # not the shape alone: another (T, U) of the same length puts its lattice points (NaN, from a
    # diverged step) where these lattices expect -inf
    key = (rows, T, U1, like.dtype)
    if getattr(_cpu_move_weights, "key", None) != key:
        _cpu_move_weights.key, _cpu_move_weights.buffer = key, like.new_full(shape, float("-inf"))
    return _cpu_move_weights.buffer


def _alphas(weights: torch.Tensor, T: int, U1: int) -> torch.Tensor:
    """alpha[t, u] of each lattice (its emit and blank log-probabilities in `weights`, from
    _move_weights): the log-probability of reaching (t, u) from (0, 0), by anti-diagonals n = t + u,
    all lattices in one loop of T + U steps: every point of a diagonal depends only on the one
    before, so a step is one add and one elementwise logaddexp. Returns them in the flat layout
    below. (A step per frame needs logcumsumexp along u, whose CPU kernel is serial: 3-4x slower at
    full size.) Points off the lattice stay -inf.

    Layout: point (t, u) lives at (t + u) * (U+2) + 1 + u of one flat row per lattice, a -inf
    slot opening each diagonal, so both predecessors of a whole diagonal are contiguous slices one
    element apart: (t, u-1) one diagonal back one column left (for u = 0 the opening slot), (t-1, u)
    one diagonal back in the same column; a view with a leading stride of 1 holds both. The
    weights of those two moves sit in one buffer, emits then blanks, so one view with a leading
    stride of (the emits' size + 1) lines up with that pair."""
    rows, length = weights.shape[1:]
    width = U1 + 1
    flat_alpha = weights.new_empty((rows, length))
    flat_alpha.view(rows, -1, width)[:, :, 0] = float("-inf")  # the opening slots
    flat_alpha[:, 1:width] = float("-inf")
    flat_alpha[:, 1] = 0.0  # (0, 0)
    pair = (2, rows, U1)
    step_sum = weights.new_empty(pair)
    for start in range(width, length, width):
        # [0]: from (t, u-1) plus its emit; [1]: from (t-1, u) plus its blank
        before = flat_alpha.as_strided(pair, (1, length, 1), start - width)
        moves = weights.as_strided(pair, (weights.stride(0) + 1, weights.stride(1), 1), start - width)
        torch.add(before, moves, out=step_sum)
        torch.logaddexp(step_sum[0], step_sum[1], out=flat_alpha[:, start + 1:start + width])
    return flat_alpha  # the lattices one under the other; _lattice_view reads one


def _lattice_view(flat_BL: torch.Tensor, T: int, U1: int) -> torch.Tensor:
    """view[b, t, u] = flat[b, (t + u) * (U+2) + 1 + u]: strides (U+2) along t, (U+3) along u."""
    width = U1 + 1
    return flat_BL.as_strided((flat_BL.size(0), T, U1), (flat_BL.stride(0), width, width + 1), flat_BL.storage_offset() + 1)
