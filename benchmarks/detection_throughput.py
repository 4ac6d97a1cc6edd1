"""Training throughput of a detection CPU tier (retinanet-* or maskrcnn-*), trainclock's step
against the plain loop a user would otherwise write (torchvision's references/detection
train_one_epoch body), side by side on the same images and start weights, and the share of a
run's time its evaluations take (one evaluation: detections over the whole validation set, then
COCOeval, against the training time between two evaluations).

  trainclock: the generic loop's train_step over the detection job (micro-batches, gradient
              norm, the tier's optimizer and schedule), eager fp32
  plain:      loss_dict = model(images, targets); losses = sum(loss_dict.values());
              optimizer.zero_grad(); losses.backward(); optimizer.step(), with the same torch
              optimizer, no trainclock code, on a copy of the same network and weights

  python benchmarks/detection_throughput.py [--member retinanet-mini] [--steps 8]
"""

from __future__ import annotations

import copy

import harness


def plain_step(job, batches):
    model = copy.deepcopy(job.model)  # the same start weights, before trainclock trains them
    optimizer = job.optimizer.build(model)  # the same torch optimizer class and settings

    def step(s: int) -> None:
        loss_dict = model(batches[s]["images"], batches[s]["targets"])
        losses = sum(loss for loss in loss_dict.values())
        optimizer.zero_grad()
        losses.backward()
        optimizer.step()

    return step


def main() -> None:
    args = harness.parser(__doc__, member="retinanet-mini", steps=8).parse_args()
    bench = harness.Bench.build(args.member)  # the tier's mosaics, cached
    spec, job = bench.spec, bench.job
    bench.header(args.steps, f"{spec.global_batch_size} images of {spec.shape.min_size} px per step")
    batches = bench.batches(args.steps + 1)  # the loop's own batches, for both loops
    plain = plain_step(job, batches)
    rate = harness.compare({"trainclock": bench.step(batches), "plain": plain}, bench, args.steps)
    evaluation, metrics = harness.timed_evaluation(bench)
    between = spec.eval_every_samples / rate["trainclock"]
    print(f"  one evaluation ({job.eval_samples} images + COCOeval, {metrics}): {evaluation:.1f} s against "
          f"{between:.1f} s of training between evaluations: {evaluation / (evaluation + between):.0%} of the run")


if __name__ == "__main__":
    main()
