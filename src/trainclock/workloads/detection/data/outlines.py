"""Instance masks as outlines: each object's COCO segmentation as the edges of its polygons, for
mask_targets.py to rasterise at 28x28 on the run's device for the sampled regions only, instead of
a full-resolution mask per object decoded on the host (7 objects of a 640x480 COCO image: 2 MB an
image, resized to 800-1333 on the device, for about 40 regions of 28x28 a step needs).

An object is inside its outline where a ray from the point crosses the edges of one of its parts an
odd number of times (parts: COCO's polygons of one object, united as pycocotools merges them). A
pixel is the square [x, x + 1) x [y, y + 1), as pycocotools rasterises (a pixel is inside when its
centre is), so an RLE object is exact too: one part, the vertical boundaries between its pixels and
the others (the ray is horizontal: a horizontal edge is never crossed). Crowd regions are never
training objects here, and COCO's other objects are polygons; the tiers' mosaics are RLE.

An image's outlines are one tensor, mask_edges (objects, parts, edges, 4) float32: x1 y1 x2 y2 of
edge e of part p of each object, padded with (0, 0, 0, 0) edges (never crossed, so a padding part
is empty) to the image's most parts in an object and longest part."""

from __future__ import annotations

import numpy as np
import torch
from pycocotools import mask as mask_utils


def polygon_edges(polygon: list[float]) -> np.ndarray:
    """(V, 4) the closed polygon's edges, vertex v to vertex v + 1 and the last back to the first."""
    points = np.asarray(polygon, np.float32).reshape(-1, 2)
    return np.concatenate([points, np.roll(points, -1, 0)], 1)


def rle_edges(rle: dict) -> np.ndarray:
    """(E, 4) the vertical edges of an RLE mask's outline: down each pixel boundary x, the runs of
    rows where the pixels either side of it differ (the image's border counts as background). The
    horizontal ray crosses them as it enters or leaves the object, so even-odd over them is exact.
    The RLE is decoded here by pycocotools (an RLE object is a tier's 64x64 mosaic item; COCO's
    are crowds, never trained on)."""
    height, width = rle["size"]
    if isinstance(rle["counts"], list):  # uncompressed: pycocotools decodes its compressed form
        rle = mask_utils.frPyObjects(rle, height, width)
    columns = mask_utils.decode(rle).T.astype(np.int8)  # [x, y]
    padded = np.pad(columns, ((1, 1), (0, 0)))
    differs = (padded[1:] != padded[:-1]).astype(np.int8)  # (width + 1, height): pixels x - 1 and x differ at row y
    # +1 where a run of differing rows starts, -1 just past its end
    steps = np.diff(np.pad(differs, ((0, 0), (1, 1))), axis=1)
    starts, ends = np.argwhere(steps == 1), np.argwhere(steps == -1)  # (x, y), both in x then y order: paired
    return np.stack([starts[:, 0], starts[:, 1], ends[:, 0], ends[:, 1]], 1).astype(np.float32)


def object_parts(segmentation: list | dict) -> list[np.ndarray]:
    """One object's parts, each (E, 4) edges: its polygons, or its RLE's outline as a single part."""
    if isinstance(segmentation, list):
        return [polygon_edges(polygon) for polygon in segmentation]
    return [rle_edges(segmentation)]


def outlines(segmentations: list) -> dict[str, torch.Tensor]:
    """An image's mask_edges (see the module's note) from its objects' segmentations (checked at
    load: layout.segmentation_problem)."""
    objects = [object_parts(s) for s in segmentations]
    parts = max((len(p) for p in objects), default=0)
    longest = max((len(part) for p in objects for part in p), default=0)
    edges = np.zeros((len(objects), parts, longest, 4), np.float32)
    for row, own in enumerate(objects):
        for index, part in enumerate(own):
            edges[row, index, :len(part)] = part
    return {"mask_edges": torch.from_numpy(edges)}


def flip_outlines(edges: torch.Tensor, width: int) -> torch.Tensor:
    """The edges of the image mirrored left to right (x -> width - x, as the boxes; a padding edge
    stays horizontal, so it is still never crossed)."""
    flipped = edges.clone()
    flipped[..., 0::2] = width - edges[..., 0::2]
    return flipped
