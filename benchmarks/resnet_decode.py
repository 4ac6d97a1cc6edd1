"""ResNet-50's host cost per training image on the CPU, for the two decoding paths of
workloads/resnet/data (transforms.py, device_decode.py), on the same full-size sample JPEGs in the
same run, alternating:
  PIL worker      what a loader worker does today: PIL decode, random resized crop to 224, flip
  device worker   what a worker does when the device decodes: read the file's bytes and its JPEG
                  header, draw the same crop and flip
  decode_jpeg     the device path's batch function run on this CPU: torchvision.io.decode_jpeg of
                  the batch (libjpeg-turbo here; nvJPEG on CUDA), crop + resize, flip, stack
Each is timed in CPU seconds of this process (time.process_time) with one intra-op thread, so the
rates are images/s per core; the cores one GPU needs follow from the published per-GPU rate. The
GPU's own decode rate (nvJPEG) needs a GPU to measure: decode_jpeg here is a CPU stand-in only.

Images: the resnet workload's sample writer (ImageNet's sizes, mostly 500x375, quality 90,
~110 KB each), written to memory (/dev/shm where there is one) as the page cache would hold them.

  python benchmarks/resnet_decode.py [--images 64] [--repeats 5] [--gpu-rate 7090]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import PIL
import torch
import torchvision
from PIL import Image

from trainclock.device import system
from trainclock.workloads.resnet.data.device_decode import DeviceDecoder, train_sample
from trainclock.workloads.resnet.data.folder import scan
from trainclock.workloads.resnet.data.sample import write_imagenet
from trainclock.workloads.resnet.data.transforms import ImageTransforms, crop_box, train_image

FULL = ImageTransforms(crop=224, resize=256)  # resnet-50's training crop
SEED = 0


def per_image(work: Callable[[], object], images: int) -> float:
    """CPU seconds of this process per image for one pass of `work` over `images` images."""
    start = time.process_time()
    work()
    return (time.process_time() - start) / images


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--images", type=int, default=64, help="sample JPEGs timed per pass")
    p.add_argument("--repeats", type=int, default=5, help="alternating rounds; the median is reported")
    p.add_argument("--gpu-rate", type=float, default=7090.0,
                   help="images/s one GPU trains at (default: NVIDIA's H100 rate from its MLPerf v3.1 resnet "
                        "log, as benchmarks/published_rates.py recomputes it)")
    args = p.parse_args()
    torch.set_num_threads(1)  # per-core rates: a loader worker is one process on one core
    memory = "/dev/shm" if os.path.isdir("/dev/shm") else None
    root = Path(tempfile.mkdtemp(prefix="resnet-decode-", dir=memory))
    try:
        files = list(scan(write_imagenet(root, args.images, SEED)).train.files)
        run(files, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run(files: list[str], args: argparse.Namespace) -> None:
    n = len(files)
    sizes = [Image.open(f).size for f in files]
    kb = statistics.mean(os.path.getsize(f) for f in files) / 1e3
    rngs = lambda: [np.random.default_rng([SEED, k, 1]) for k in range(n)]  # noqa: E731  (TrainImages's seeds)
    decoder = DeviceDecoder(torch.device("cpu"), FULL, chunk=n)
    encoded = [train_sample(f, FULL, r) for f, r in zip(files, rngs())]
    pil = torch.stack([train_image(f, FULL, r) for f, r in zip(files, rngs())])
    same = sum(e.box == crop_box(r, *size, FULL) for e, r, size in zip(encoded, rngs(), sizes))
    agree = float((decoder(encoded).int() - pil.int()).abs().float().mean())
    print(f"machine: {system.cpu_model()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, torch "
          f"{torch.__version__}, torchvision {torchvision.__version__}, Pillow {PIL.__version__}; 1 intra-op thread")
    width, height = statistics.mean(w for w, _ in sizes), statistics.mean(h for _, h in sizes)
    print(f"{n} sample JPEGs, mean {width:.0f}x{height:.0f} px, {kb:.0f} KB; crop {FULL.crop}; "
          f"device path vs PIL path: mean |diff| {agree:.2f} of 255, {same} of {n} crop boxes the same")
    paths = {
        "PIL worker (decode + crop + flip)": lambda: [train_image(f, FULL, r) for f, r in zip(files, rngs())],
        "device worker (bytes + header + crop params)": lambda: [train_sample(f, FULL, r)
                                                                 for f, r in zip(files, rngs())],
        "decode_jpeg + crop on CPU (batch function)": lambda: decoder(encoded),
    }
    for work in paths.values():  # warm-up: first-touch, the allocator, libjpeg's tables
        work()
    seconds: dict[str, list[float]] = {name: [] for name in paths}
    for r in range(args.repeats):
        for name, work in paths.items():
            seconds[name].append(per_image(work, n))
        print(f"round {r + 1}: " + ", ".join(f"{1 / s[-1]:,.0f}" for s in seconds.values())
              + f" images/s per core; load {os.getloadavg()[0]:.1f}")
    median = {name: statistics.median(s) for name, s in seconds.items()}
    pil_s, worker_s, decode_s = median.values()
    print(f"median of {args.repeats} rounds, images/s per core (cores for one GPU at {args.gpu_rate:,.0f} images/s):")
    for name, s in median.items():
        print(f"  {name:46s} {1 / s:8,.0f}  ({args.gpu_rate * s:5.1f} cores)")
    print(f"the device path's worker part costs {worker_s / pil_s:.1%} of the PIL worker's "
          f"({pil_s / worker_s:.0f}x less host CPU per image); decoding on this CPU with decode_jpeg instead of PIL "
          f"costs {decode_s / pil_s:.0%} of PIL's. The GPU's nvJPEG rate needs a GPU to measure.")


if __name__ == "__main__":
    main()
