"""COCO mAP at val2017's size on the CPU: pycocotools' COCOeval against faster-coco-eval's
COCOeval_faster (what workloads/detection/metric.py uses when it is installed), on the same
ground truth and the same detections in the same run, alternating. Each timing is what the
workload's evaluation does per kind: loadRes + evaluate + accumulate + summarize, in process CPU
time (faster-coco-eval computes mask IoUs on a thread per core; CPU time counts all of them, the
wall time is printed beside it). The twelve stats of both are compared first.

The set (evaluation_set): COCO val2017's 5,000 images at COCO's sizes with its ~7 objects each
(polygon masks, 1% crowds as uncompressed RLE, as COCO's are), over COCO's 80 category ids, and
detections as the models emit them: Mask R-CNN's 100 per image with box and mask (compressed RLE
strings, as metric.detections writes them), RetinaNet's 300 boxes per image. Each object is found
with a jittered box and polygon (the jitter drawn per detection, so IoUs span 0.3-0.95), some under
a wrong class or twice; false positives of random size, class and lower score fill the rest.

  python benchmarks/coco_eval_speed.py [--images 5000] [--masks-per-image 100] [--boxes-per-image 300]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import os
import time
from collections.abc import Callable

import numpy as np
from pycocotools import mask as mask_utils

from trainclock.workloads.detection.data.sample import COCO, OfficialSet, file_names, objects

# COCO's 80 category ids: 1-90 less the ten its 2017 release never used
COCO_CATEGORY_IDS = [i for i in range(1, 91) if i not in (12, 26, 29, 30, 45, 66, 68, 69, 71, 83)]
# COCO val2017 marks about 1% of its objects iscrowd (sample.COCO has none: training ignores them)
VAL = OfficialSet("coco", COCO.sizes, COCO.slope, COCO.objects, True, 0.01)
ONE = OfficialSet("coco", VAL.sizes, VAL.slope, (1, 1), True, 0.0)  # a false positive's outline
KINDS = {"bbox": "box", "segm": "mask"}


def uncompressed_rle(polygon: list[float], height: int, width: int) -> dict:
    """A polygon as COCO's crowd annotations store their masks: runs of 0s and 1s down the columns."""
    flat = mask_utils.decode(mask_utils.merge(mask_utils.frPyObjects([polygon], height, width))).ravel(order="F")
    edges = np.flatnonzero(np.diff(flat)) + 1
    runs = np.diff(np.concatenate([[0], edges, [flat.size]]))
    if flat[0]:  # counts start with a run of 0s
        runs = np.concatenate([[0], runs])
    return {"size": [height, width], "counts": runs.tolist()}


def detection(rng: np.random.Generator, polygon: np.ndarray, width: int, height: int, category: int, score: float,
              error: float, masks: bool) -> dict:
    """A detection of the object `polygon` outlines, its vertices moved by `error` of its size: a
    box (the moved outline's extent, nudged again as a box head's differs from its mask head's) and
    with `masks` the outline's compressed RLE."""
    xs, ys = polygon[0::2], polygon[1::2]
    size = np.array([np.ptp(xs), np.ptp(ys)]) + 1.0
    shift = rng.normal(0, error, 2) * size  # a misplaced object moves as a whole, and its outline wobbles
    xs = np.clip(xs + shift[0] + rng.normal(0, error / 2, xs.size) * size[0], 0, width - 1)
    ys = np.clip(ys + shift[1] + rng.normal(0, error / 2, ys.size) * size[1], 0, height - 1)
    x0, y0, x1, y1 = xs.min(), ys.min(), xs.max(), ys.max()
    x0, x1 = np.clip([x0, x1] + rng.normal(0, error / 4, 2) * size[0], 0, width)
    y0, y1 = np.clip([y0, y1] + rng.normal(0, error / 4, 2) * size[1], 0, height)
    out = {"category_id": category, "score": float(score),
           "bbox": [round(float(v), 2) for v in (min(x0, x1), min(y0, y1), abs(x1 - x0), abs(y1 - y0))]}
    if masks:
        rle = mask_utils.merge(mask_utils.frPyObjects([np.stack([xs, ys], 1).ravel().tolist()], height, width))
        out["segmentation"] = {"size": rle["size"], "counts": rle["counts"].decode()}
    return out


def evaluation_set(images: int, per_image: int, masks: bool, seed: int = 0) -> tuple[dict, list[dict]]:
    """(COCO ground truth dict, detections as COCO result dicts): up to `per_image` detections per
    image, with masks when `masks`. The ground truth depends on `seed` alone, not on the detections."""
    rng = np.random.default_rng([seed, 5000])
    found = np.random.default_rng([seed, per_image, int(masks)])
    gt_images: list[dict] = []
    annotations: list[dict] = []
    results: list[dict] = []
    for image_id, name in file_names(rng, "coco", images):
        width, height = VAL.sizes[int(rng.integers(len(VAL.sizes)))]
        gt_images.append({"id": image_id, "file_name": name, "height": height, "width": width})
        truth = objects(rng, VAL, width, height, image_id, len(annotations) + 1, COCO_CATEGORY_IDS)
        mine: list[dict] = []
        for ann in truth:
            polygon = np.array(ann["segmentation"][0])
            if ann["iscrowd"]:
                ann["segmentation"] = uncompressed_rle(ann["segmentation"][0], height, width)
            if found.random() < 0.1:  # missed
                continue
            error = found.uniform(0.01, 0.15)
            for copies in range(1 + int(found.random() < 0.15)):  # some found twice, the second lower
                wrong = found.random() < 0.1
                category = int(found.choice(COCO_CATEGORY_IDS)) if wrong else ann["category_id"]
                score = np.clip(0.95 - 3 * error - 0.3 * copies - 0.3 * wrong + found.normal(0, 0.1), 0.05, 1)
                mine.append(detection(found, polygon, width, height, category, score, error, masks))
        # false positives: random objects of random classes, mostly scored below the true ones
        while len(mine) < per_image:
            [fake] = objects(found, ONE, width, height, image_id, 0, COCO_CATEGORY_IDS)
            mine.append(detection(found, np.array(fake["segmentation"][0]), width, height, fake["category_id"],
                                  found.beta(1, 6), 0.0, masks))
        mine.sort(key=lambda r: -r["score"])  # the models keep their top `per_image`
        results += [{"image_id": image_id, **r} for r in mine[:per_image]]
        annotations += truth
    categories = [{"id": i, "name": f"class {i}"} for i in COCO_CATEGORY_IDS]
    return {"images": gt_images, "annotations": annotations, "categories": categories}, results


def for_kind(results: list[dict], kind: str) -> list[dict]:
    """The results as metric.score hands them to COCOeval: masks alone for segm, boxes alone for bbox."""
    drop = "bbox" if kind == "segm" else "segmentation"
    return [{k: v for k, v in r.items() if k != drop} for r in results]


def pycocotools_stats(gt: dict, results: list[dict], kind: str) -> np.ndarray:
    from pycocotools.coco import COCO as Coco
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        truth = Coco()
        truth.dataset = gt
        truth.createIndex()
        evaluator = COCOeval(truth, truth.loadRes(results), kind)
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    return np.array(evaluator.stats)


def faster_stats(gt: dict, results: list[dict], kind: str) -> np.ndarray:
    from faster_coco_eval import COCO as Coco
    from faster_coco_eval import COCOeval_faster

    truth = Coco(gt)
    evaluator = COCOeval_faster(truth, truth.loadRes(results), kind, print_function=lambda *_: None)
    evaluator.evaluate()
    evaluator.accumulate()
    evaluator.summarize()
    return np.array(evaluator.stats)


EVALUATORS: dict[str, Callable[[dict, list[dict], str], np.ndarray]] = {
    "pycocotools": pycocotools_stats, "faster-coco-eval": faster_stats}


def timed(evaluate: Callable[[dict, list[dict], str], np.ndarray], gt: dict, results: list[dict],
          kind: str) -> tuple[np.ndarray, float, float]:
    """(stats, CPU seconds, wall seconds) of one evaluation, each on its own copies (both loadRes
    and COCOeval write into the dicts they are given); the copying is not timed."""
    gt, results = copy.deepcopy(gt), for_kind(results, kind)
    cpu, wall = time.process_time(), time.perf_counter()
    stats = evaluate(gt, results, kind)
    return stats, time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    from importlib.metadata import version

    from trainclock.device import system

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=5000)
    p.add_argument("--masks-per-image", type=int, default=100, help="Mask R-CNN's detections per image (0: none)")
    p.add_argument("--boxes-per-image", type=int, default=300, help="RetinaNet's detections per image (0: none)")
    p.add_argument("--repeats", type=int, default=1)
    args = p.parse_args()
    print(f"machine: {system.cpu_model()}, {os.cpu_count()} vCPUs, load {os.getloadavg()[0]:.1f}; "
          f"pycocotools {version('pycocotools')}, faster-coco-eval {version('faster-coco-eval')}")
    runs = [(f"Mask R-CNN, {args.masks_per_image} per image", args.masks_per_image, True, ("bbox", "segm")),
            (f"RetinaNet, {args.boxes_per_image} per image", args.boxes_per_image, False, ("bbox",))]
    for title, per_image, masks, kinds in runs:
        if not per_image:
            continue
        made = time.process_time()
        gt, results = evaluation_set(args.images, per_image, masks)
        print(f"\n{title}: {len(gt['images']):,} images, {len(gt['annotations']):,} objects, "
              f"{len(results):,} detections (made in {time.process_time() - made:.0f} CPU s)")
        for kind in kinds:
            seconds: dict[str, list[float]] = {name: [] for name in EVALUATORS}
            stats = {}
            for r in range(args.repeats):
                for name, evaluate in EVALUATORS.items():
                    stats[name], cpu, wall = timed(evaluate, gt, results, kind)
                    seconds[name].append(cpu)
                    print(f"  {KINDS[kind]} round {r + 1}: {name} {cpu:.1f} CPU s ({wall:.1f} s wall), "
                          f"load {os.getloadavg()[0]:.1f}")
            gap = np.abs(stats["pycocotools"] - stats["faster-coco-eval"])
            slow, fast = min(seconds["pycocotools"]), min(seconds["faster-coco-eval"])
            print(f"  {KINDS[kind]} mAP {stats['pycocotools'][0]:.4f} vs {stats['faster-coco-eval'][0]:.4f}; "
                  f"largest difference over the 12 stats {gap.max():.1e} (per stat: "
                  f"{' '.join(f'{g:.0e}' for g in gap)})")
            print(f"  {KINDS[kind]}: pycocotools {slow:.1f} CPU s, faster-coco-eval {fast:.1f} CPU s, "
                  f"{slow / fast:.1f}x faster (best of {args.repeats})")


if __name__ == "__main__":
    main()
