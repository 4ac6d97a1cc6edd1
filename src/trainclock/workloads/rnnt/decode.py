"""Greedy transducer decoding (the reference's RNNTGreedyDecoder), batched: at each encoder frame
every utterance emits its argmax piece and stays on the frame until it emits the blank (at most
`per_frame` pieces a frame, 30 as in the reference), and stops at `per_utterance` pieces (the rules'
eval_max_prediction_symbols, 300). The batch only changes speed: each row is decoded as alone."""

from __future__ import annotations

import torch

from trainclock.workloads.rnnt.model import RNNT


@torch.no_grad()
def greedy_decode(model: RNNT, feats_BTF: torch.Tensor, lens_B: torch.Tensor, per_utterance: int = 300,
                  per_frame: int = 30) -> list[list[int]]:
    f_BTH, lens_B = model.encode(feats_BTF, lens_B)
    B, blank = f_BTH.size(0), model.config.blank
    g, state = model.predict(None, None, start=False)
    g, state = g.expand(B, -1, -1).contiguous(), tuple(s.expand(-1, B, -1).contiguous() for s in state)
    out: list[list[int]] = [[] for _ in range(B)]
    counts = torch.zeros(B, dtype=torch.long, device=f_BTH.device)
    for t in range(f_BTH.size(1)):
        active = (lens_B > t) & (counts < per_utterance)
        for _ in range(per_frame):
            if not active.any():
                break
            k = model.joint(f_BTH[:, t:t + 1], g)[:, 0, 0].argmax(-1)
            emit = active & (k != blank)
            if not emit.any():
                break
            g_new, state_new = model.predict(k.clamp(max=blank - 1)[:, None], state, start=False)
            keep = emit[:, None, None]
            g = torch.where(keep, g_new, g)
            state = tuple(torch.where(emit[None, :, None], new, old) for new, old in zip(state_new, state))
            for i in emit.nonzero().flatten().tolist():
                out[i].append(int(k[i]))
            counts += emit.long()
            active = emit & (counts < per_utterance)
    return out
