"""Mask R-CNN's mask targets made on the run's device, at 28x28, for the sampled regions only: each
positive region's object outline (data/outlines.py) rasterised in its box, in plain PyTorch at
shapes the host knows (no read of the device's values), as the MLPerf reference makes them
(maskrcnn-benchmark crops each polygon to the box, scales it to 28x28 and rasterises it with
pycocotools; NVIDIA's submissions do the same in a CUDA kernel): a cell is 1 where its centre lies
inside the object, else 0.

torchvision instead pools each region's full-resolution mask with roi_align (aligned=False), a soft
target sampled half a pixel off the box; tests/workloads/detection/test_mask_targets.py measures
how close the two are."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

# elements of a chunk's largest tensors (regions x rows x parts x edges): bounds the memory whatever
# the outlines' lengths, in chunks whose sizes the shapes decide
CHUNK_ELEMENTS = 1 << 23


def rasterize(edges: Tensor, boxes: Tensor, size: int) -> Tensor:
    """(K, size, size) float 0/1: cell (i, j) of region k is 1 where the centre of that cell of
    boxes[k] (x1 y1 x2 y2) lies inside outline k, edges (K, parts, E, 4) as data/outlines.py lays
    them out."""
    k, parts, length = edges.shape[:3]
    per_region = size * max(parts, 1) * max(length, 1)
    chunk = max(1, CHUNK_ELEMENTS // per_region)
    out = [_rasterize(edges[i:i + chunk], boxes[i:i + chunk], size) for i in range(0, k, chunk)]
    return torch.cat(out) if out else boxes.new_zeros(0, size, size)


def _rasterize(edges: Tensor, boxes: Tensor, size: int) -> Tensor:
    """A scanline fill: each row of cells meets each edge at most once, and a crossing lies right
    of the centres of the row's first cells_left cells; cell j is inside a part where an odd number
    of the part's crossings have cells_left > j (a ray from its centre towards +x crosses them),
    counted by a histogram of cells_left and its running sum (no sort, no per-cell comparison);
    inside the object where inside any part (pycocotools' merge)."""
    edges, boxes = edges.float(), boxes.float()
    centres = (torch.arange(size, device=boxes.device, dtype=torch.float32) + 0.5) / size  # in box units
    x1, y1, x2, y2 = (v.view(-1, 1, 1, 1) for v in boxes.unbind(-1))  # broadcast over (rows, parts, edges)
    row_y = y1 + centres.view(1, -1, 1, 1) * (y2 - y1)  # (K, rows, 1, 1)
    ex1, ey1, ex2, ey2 = (e.unsqueeze(1) for e in edges.unbind(-1))  # (K, 1, parts, E)
    # an edge crosses a row it straddles, half-open so that a vertex on the row counts once; a
    # horizontal edge (padding included) straddles none
    straddles = (ey1 > row_y) != (ey2 > row_y)  # (K, rows, parts, E)
    rise = torch.where(ey2 == ey1, 1.0, ey2 - ey1)  # any non-zero: the quotient is used where it straddles only
    cross_x = ex1 + (row_y - ey1) * (ex2 - ex1) / rise
    # in box widths, clamped (far left or right of the box is as good as just outside it)
    u = ((cross_x - x1) / (x2 - x1).clamp(min=1e-6)).clamp(-1.0, 2.0)
    # cells whose centre (j + 0.5) / size is left of the crossing: j < u * size - 0.5
    cells_left = torch.where(straddles, torch.ceil(u * size - 0.5).clamp(0, size), 0).long()
    histogram = torch.zeros(*cells_left.shape[:3], size + 1, dtype=torch.int32, device=boxes.device)
    histogram.scatter_add_(-1, cells_left, torch.ones_like(cells_left, dtype=torch.int32))
    # crossings right of cell j: those with cells_left > j, all less those with cells_left <= j
    right = histogram.sum(-1, keepdim=True) - histogram.cumsum(-1, dtype=torch.int32)
    inside = (right[..., :size] & 1).bool().any(2)  # (K, rows, cells)
    return inside.float()


def outline_targets(targets: list[dict[str, Tensor]], boxes: Tensor | list[Tensor], gt_row: Tensor | list[Tensor],
                    positive: Tensor | list[Tensor], size: int) -> Tensor:
    """The mask slots' targets, (all slots, size, size), as project_masks lays them out (image by
    image, (N, K) or N lists of K_i), from the targets' outlines: every image's objects padded to the
    batch's most parts and longest part and stacked, so that one rasterize serves the whole batch.
    A slot with no positive rasterises a blank outline (all 0; its target is never used)."""
    parts = max(t["mask_edges"].shape[1] for t in targets)
    longest = max(t["mask_edges"].shape[2] for t in targets)
    edges, rows, regions = [], [], []
    offset = 0
    for t, b, row, pos in zip(targets, boxes, gt_row, positive):
        e = t["mask_edges"]
        edges.append(F.pad(e, (0, 0, 0, longest - e.shape[2], 0, parts - e.shape[1])))
        rows.append(torch.where(pos, row + offset, -1))  # -1: the blank outline appended below
        regions.append(b)
        offset += len(e)
    edges.append(edges[0].new_zeros(1, parts, longest, 4))  # a blank outline, for the slots without a positive
    row = torch.cat(rows).flatten()
    row = torch.where(row < 0, offset, row)
    return rasterize(torch.cat(edges)[row], torch.cat(regions).reshape(-1, 4), size)
