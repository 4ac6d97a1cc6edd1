"""Host CPU time per training image of the detection loaders, PIL decoding on the host against
device decoding (datasets/image_decode.py: the host reads bytes and the header's size; the decode
runs on the run's device), on one thread, at the full sizes' image sizes (the workloads'
write_sample_data: OpenImages' up to 1024 px for ssd, COCO's up to 640 for maskrcnn), with each
image's target (boxes, labels; Mask R-CNN's outlines) and flip. Also the decode itself on this CPU
(decode_jpeg's libjpeg-turbo): what a CPU run that forces --decode-on-device pays per image.

  python benchmarks/detection_decode.py [--images 32] [--repeats 3]"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch

from published_rates import published_rates
from trainclock.workloads.detection import WORKLOADS
from trainclock.workloads.detection.data.loader import TrainBatches, decode_images
from trainclock.workloads.detection.spec import get_member
from trainclock.workloads.detection.workload import load_splits
from trainclock.datasets.image_decode import DeviceJpegDecoder

CPU = torch.device("cpu")


def per_image(work, images: int, repeats: int) -> float:
    """The least CPU seconds per image of `repeats` runs of work() (the others had neighbours)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best / images


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(1)
    published = {b: max(rows)[0] for b, rows in published_rates().items()}
    print(f"one CPU thread, load average {os.getloadavg()[0]:.1f}; ms of host CPU per training image "
          "(images/s per core)")
    for workload, member in zip(WORKLOADS, ("retinanet-resnext50", "maskrcnn-r50")):
        spec = get_member(member, workload.key)
        with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as folder:
            train, _ = load_splits(spec, Path(workload.write_sample_data(member, Path(folder), args.images, 0)))
            masks = workload.key == "maskrcnn"
            decoder = DeviceJpegDecoder(CPU, chunk=spec.micro_batch_size)
            pil = TrainBatches(train, 0, args.images, masks)
            device = TrainBatches(train, 0, args.images, masks, decoder=decoder)
            ks = range(args.images)
            host_pil = per_image(lambda: [pil.sample(k) for k in ks], args.images, args.repeats)
            host_device = per_image(lambda: [device.sample(k) for k in ks], args.images, args.repeats)
            encoded = [device.sample(k)[0] for k in ks]
            decode = per_image(lambda: decode_images(decoder, encoded), args.images, args.repeats)
        rate = published.get(workload.key, float("nan"))
        print(f"{member:20} PIL on the host {host_pil * 1e3:6.2f} ({1 / host_pil:6.0f}/s)   bytes + header "
              f"{host_device * 1e3:6.2f} ({1 / host_device:6.0f}/s)   decode_jpeg on this CPU {decode * 1e3:6.2f}   "
              f"published {rate:.0f}/s per GPU")


if __name__ == "__main__":
    main()
