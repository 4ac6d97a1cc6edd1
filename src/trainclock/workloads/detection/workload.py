"""The detection benchmarks as workloads: RetinaNet (MLPerf ssd) and Mask R-CNN (maskrcnn) share
data (COCO-format layouts, the tiers' mosaics), batches of image lists and target dicts, the
torchvision models and COCOeval; each has its own members, optimizer and log keys."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import torch

from trainclock.distributed.context import ParallelContext
from trainclock.distributed.layout import Layout
from trainclock.distributed.parallelize import ModelParallelism, build_parallelized
from trainclock.errors import UsageError
from trainclock.workload.base import EvalSchedule, EvalShard, RunSettings, TrainJob
from trainclock.workload.benchmark import BenchmarkWorkload, member_job
from trainclock.workload.spec_base import division
from trainclock.workloads.detection.cost import cost_model, train_flops_per_image
from trainclock.workloads.detection.data import openimages_csv
from trainclock.workloads.detection.data.layout import Split, load_split, split_files
from trainclock.workloads.detection.data.loader import EvalBatches, TrainBatches
from trainclock.workloads.detection.data.prepare import prepare
from trainclock.workloads.detection.data.sample import write_mosaics, write_official
from trainclock.workloads.detection.metric import ground_truth, predict, score
from trainclock.workloads.detection.optim import AdamWarmup, SGDWarmupSteps
from trainclock.workloads.detection.spec import MEMBERS, METRICS, MLPERF_ROUND, DetectionSpec, get_member
from trainclock.workloads.detection.cost import run_progress
from trainclock.datasets.image_decode import DeviceJpegDecoder

DATASETS = {"openimages": "the MLPerf OpenImages subset (<folder>/train/labels/openimages-mlperf.json, train/data/, "
                          "validation/...; or OpenImages v6's CSVs and images, converted by `trainclock data "
                          "prepare ssd --data FOLDER`)",
            "coco": "COCO 2017 (<folder>/annotations/instances_train2017.json, train2017/, val2017/)"}
PARALLELISM = ModelParallelism(gpu_memory_format=torch.channels_last)  # data parallel only, as every published entry trains them
RULES_DATASETS = {"ssd": "openimages", "maskrcnn": "coco"}


class DetectionWorkload(BenchmarkWorkload):
    mlperf_round = MLPERF_ROUND
    unit = batch_units = "images"

    def __init__(self, key: str, title: str, full_size_flags: str) -> None:
        self.key, self.title, self.full_size_flags = key, title, full_size_flags
        self.specs = MEMBERS[key]

    def describe(self, spec: DetectionSpec) -> str:
        return spec.shape.describe()

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        group.add_argument("--backbone-weights", metavar="PATH",
                           help="the full size's ImageNet backbone weights: a local torchvision state dict")
        group.add_argument("--decode-on-device", action=argparse.BooleanOptionalAction, default=None,
                           help="decode the JPEGs on the run's device (torchvision.io.decode_jpeg), the host reading "
                                "bytes only (default: on CUDA devices)")

    def configure(self, spec: DetectionSpec, settings: RunSettings, layout: Layout,
                  device: torch.device) -> DetectionSpec:
        if settings.extra.get("decode_on_device") is not None:
            spec = replace(spec, decode_on_device=settings.extra["decode_on_device"])
        return spec

    def check_run(self, spec: DetectionSpec, settings: RunSettings, layout: Layout, device: torch.device) -> None:
        if spec.full and device.type != "meta":  # refused now, before the run measures the machine
            if settings.data is None:
                raise UsageError(f"{spec.name} trains on {DATASETS[spec.dataset]}: pass --data FOLDER (it is "
                                 "never downloaded)")
            split_files(official_folder(Path(settings.data), convert=False), "train")
            weights = settings.extra.get("backbone_weights")
            if weights is None:
                raise UsageError(f"{spec.name} starts from ImageNet backbone weights: pass --backbone-weights PATH "
                                 "(a local file; nothing is downloaded)")
            from trainclock.workloads.detection.model import load_backbone_weights  # torchvision: only where a network is built

            load_backbone_weights(weights)

    def build_job(self, spec: DetectionSpec, ctx: ParallelContext, device: torch.device, seed: int,
                  settings: RunSettings) -> TrainJob:
        root = ctx.main_first(lambda: data_folder(spec, settings.data))  # one rank generates
        train, val = load_splits(spec, root)
        torch.manual_seed(seed)
        model = self.build_model(spec, ctx, device, settings)
        on_device = spec.decode_on_device if spec.decode_on_device is not None else device.type == "cuda"
        # one decoder a loader: each owns a stream, and training and evaluation read on different threads
        decoders = [DeviceJpegDecoder(device, spec.micro_batch_size) if on_device else None for _ in range(2)]
        batches = TrainBatches(train, seed, spec.global_batch_size, masks=spec.benchmark == "maskrcnn",
                               decoder=decoders[0])
        return detection_job(spec, model, batches, train, val, (ctx.dp_rank, ctx.dp_size), device,
                             dataset=spec.dataset, eval_decoder=decoders[1])

    def build_model(self, spec: DetectionSpec, ctx: ParallelContext, device: torch.device,
                    settings: RunSettings) -> torch.nn.Module:
        """The detector as this rank trains it, from the backbone weights where given. Built whole
        (44M parameters at most), except for a meta device (a dry run): built and cut on meta."""
        from trainclock.workloads.detection.model import build_model  # torchvision: only where a network is built

        weights = None if device.type == "meta" else settings.extra.get("backbone_weights")  # a dry run reads nothing
        return build_parallelized(lambda: build_model(spec.shape, weights), device, ctx, PARALLELISM,
                                  compile=settings.compile, activation_checkpointing=settings.activation_checkpointing)

    def optimizer(self, spec: DetectionSpec) -> AdamWarmup | SGDWarmupSteps:
        return optimizer(spec, spec.train_images)

    def sample_loss(self, spec: DetectionSpec, model: torch.nn.Module, rows: int, device: torch.device) -> None:
        return None  # proposals, matches and losses depend on the boxes' values: fake tensors have none

    def fetch_data(self) -> str | None:
        return None  # the tiers generate their mosaics in prepare (Fashion-MNIST comes with Debian)

    def prepare_data(self, member: str, data: str | None, force: bool = False) -> str:
        spec = get_member(member, self.key)
        if spec.full and data is None:
            raise UsageError(f"{spec.name} reads {DATASETS[spec.dataset]}: pass --data FOLDER")
        root = official_folder(Path(data), force=force) if data is not None else data_folder(spec, None, force)
        train, val = load_splits(spec, root)
        return f"{len(train.records):,} train and {len(val.records):,} val images in {len(train.category_ids)} classes in {root}"

    def cost(self, member: str):
        return cost_model(member, self.key)

    def write_sample_data(self, member: str, folder: Path, samples: int, seed: int) -> str:
        spec = get_member(member, self.key)
        if samples <= 0:
            raise UsageError(f"sample data needs at least one training image, got {samples}")
        if spec.full:
            return str(write_official(Path(folder), spec.dataset, samples, seed))
        return str(write_mosaics(Path(folder), spec.layout, samples, 1, spec.image_side, seed))


def official_folder(data: Path, convert: bool = True, force: bool = False) -> Path:
    """`data` itself, or for a folder of OpenImages v6 CSVs its MLPerf layout (converted when `convert`)."""
    if not openimages_csv.is_csv_folder(data):
        return data.expanduser()
    if convert or openimages_csv.is_converted(data):
        return openimages_csv.convert(data, force)
    raise UsageError(f"{data} holds OpenImages CSVs not converted (or changed since): convert them first "
                     f"(untimed) with `trainclock data prepare ssd --data {data}`")


def data_folder(spec: DetectionSpec, data: str | None, force: bool = False) -> Path:
    if data is not None:
        return official_folder(Path(data), convert=False)
    if spec.full:
        raise UsageError(f"{spec.name} trains on {DATASETS[spec.dataset]}: pass --data FOLDER")
    return prepare(spec.layout, spec.train_images, spec.val_images, spec.image_side, force=force)


def load_splits(spec: DetectionSpec, root: Path) -> tuple[Split, Split]:
    """Both splits, labelled by the training split's category ids (the model's labels are those);
    Mask R-CNN's every box needs a valid segmentation, RetinaNet's are ignored."""
    masks = spec.benchmark == "maskrcnn"
    first = 1 if masks else 0  # Mask R-CNN's label 0 is the background
    train = load_split(root, "train", first, keep_empty=False, masks=masks)
    return train, load_split(root, "val", first, keep_empty=True, categories=train.category_ids, masks=masks)


def detection_job(spec: DetectionSpec, model: torch.nn.Module, batch, train: Split, val: Split,
                  shard: tuple[int, int], device: torch.device, dataset: str,
                  eval_decoder: DeviceJpegDecoder | None = None) -> TrainJob:
    """The job around a built model and loaded splits; progress is in epochs of this train split.
    eval_decoder: the validation images decoded on its device."""
    masks = spec.benchmark == "maskrcnn"
    classes = len(train.category_ids) + (1 if masks else 0)
    # COCO 2017 lists 80 categories under ids 1-90 (10 ids unused); torchvision's Mask R-CNN predicts 91
    # classes, the background and one per id, so real COCO's contiguous labels 1-80 use 81 of them
    coco_ids = masks and max(train.category_ids) + 1 == spec.shape.num_classes
    if classes != spec.shape.num_classes and not coco_ids:
        raise UsageError(f"{spec.name} has {spec.shape.num_classes} classes, the data {classes}")
    evaluation = EvalBatches(val, spec.eval_batch, shard, eval_decoder)
    names = METRICS[spec.benchmark]

    def evaluate(m: torch.nn.Module, autocast, part: tuple[int, int]) -> EvalShard:
        if part != shard:
            raise RuntimeError(f"the eval batches were built for shard {shard}, asked for {part}")
        return predict(m, evaluation, autocast, device, train.category_of, masks)  # the model's labels

    def loss(m: torch.nn.Module, micro: dict) -> torch.Tensor:
        return sum(m(micro["images"], micro["targets"]).values())

    train_images = len(train.records)
    return member_job(
        spec,
        division=division(spec, dataset, RULES_DATASETS[spec.benchmark]),
        benchmark=spec.benchmark,
        model=model,
        batch=batch,
        loss=loss,
        evaluate=evaluate,
        score=lambda stats: score(ground_truth(val.files.labels), stats.gathered, names),
        progress=run_progress(spec, train_images),  # as the cost model counts it: the plan and the log alike
        flops_per_sample=train_flops_per_image(spec),  # the convolutions and linear layers (cost.py)
        optimizer=optimizer(spec, train_images),
        # the full sizes score COCO on a thread while the next epoch trains, as NVIDIA's v3.1 ssd and
        # maskrcnn do (their logs: eval_start, the next epoch, then eval_accuracy); the CPU tiers score
        # inline, so a tier's run stops at the same step every time
        eval_schedule=EvalSchedule(every=train_images if spec.full else spec.eval_every_samples,
                                   background_scoring=spec.full),
        eval_samples=len(val.records),
        max_samples=spec.max_samples,
        log_keys=log_keys(spec, train_images, len(val.records)),
        # Mask R-CNN keeps each image's aspect: sizes vary, over at most 36 shapes where bucketed
        fixed_input_shapes=spec.shape.fixed_size or spec.shape.bucketed,
    )


def optimizer(spec: DetectionSpec, train_images: int) -> AdamWarmup | SGDWarmupSteps:
    if spec.benchmark == "ssd":
        return AdamWarmup(spec.learning_rate, spec.warmup_epochs, spec.warmup_factor,
                          train_images / spec.global_batch_size, decay_steps=spec.decay_steps)
    return SGDWarmupSteps(spec.learning_rate, spec.warmup_steps, spec.warmup_factor, spec.decay_steps)


def log_keys(spec: DetectionSpec, train_images: int, val_images: int) -> dict:
    keys: dict = {"train_samples": train_images}
    if spec.benchmark == "maskrcnn":
        keys.update({"num_image_candidates": spec.shape.candidates, "min_image_size": spec.shape.min_size,
                     "max_image_size": spec.shape.max_size})
    return keys
