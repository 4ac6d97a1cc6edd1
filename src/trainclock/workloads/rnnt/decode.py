"""Greedy transducer decoding (the reference's RNNTGreedyDecoder), batched: each utterance emits
its argmax piece at its current encoder frame and stays on the frame until it emits the blank (at
most `per_frame` pieces a frame, 30 as in the reference), and stops at `per_utterance` pieces (the
rules' eval_max_prediction_symbols, 300). The batch only changes speed: each row is decoded as alone.

Every utterance keeps its own frame pointer (label looping), so one step of the loop is one joint
and one prediction step for all rows at once, each row either emitting or moving to its next frame;
rows that are done are masked. Nothing is read back per symbol: the loop runs at most frames +
per_utterance steps (each step emits or advances), checks every `check_every` steps whether any
row is still decoding (one host read), and the pieces come back in one read at the end."""

from __future__ import annotations

import torch

from trainclock.workloads.rnnt.model import RNNT


@torch.no_grad()
def greedy_decode(model: RNNT, feats_BTF: torch.Tensor, lens_B: torch.Tensor, per_utterance: int = 300,
                  per_frame: int = 30, check_every: int = 16) -> list[list[int]]:
    f_BTH, lens_B = model.encode(feats_BTF, lens_B)
    (B, T, _), blank, device = f_BTH.shape, model.config.blank, f_BTH.device
    g, state = model.predict(None, None, start=False)
    g, state = g.expand(B, -1, -1).contiguous(), tuple(s.expand(-1, B, -1).contiguous() for s in state)
    rows = torch.arange(B, device=device)
    frame = torch.zeros(B, dtype=torch.long, device=device)  # each utterance's current encoder frame
    on_frame = torch.zeros_like(frame)  # pieces emitted at the current frame
    counts = torch.zeros_like(frame)
    pieces = torch.zeros(B, max(1, per_utterance), dtype=torch.long, device=device)
    for step in range(T + per_utterance):
        active = (frame < lens_B) & (counts < per_utterance)
        if step % check_every == 0 and not bool(active.any()):  # the only read inside the loop
            break
        k = model.joint(f_BTH[rows, frame.clamp(max=max(T - 1, 0))][:, None], g)[:, 0, 0].argmax(-1)
        emit = active & (k != blank)
        slot = counts.clamp(max=pieces.size(1) - 1)[:, None]
        pieces.scatter_(1, slot, torch.where(emit, k, pieces.gather(1, slot)[:, 0])[:, None])
        counts += emit.long()
        on_frame = torch.where(emit, on_frame + 1, 0)
        advance = active & (~emit | (on_frame == per_frame))  # a blank, or the frame's last allowed piece
        frame += advance.long()
        on_frame = torch.where(advance, 0, on_frame)
        g_new, state_new = model.predict(k.clamp(max=blank - 1)[:, None], state, start=False)
        g = torch.where(emit[:, None, None], g_new, g)
        state = tuple(torch.where(emit[None, :, None], new, old) for new, old in zip(state_new, state))
    return [row[:n] for row, n in zip(pieces.tolist(), counts.tolist())]
