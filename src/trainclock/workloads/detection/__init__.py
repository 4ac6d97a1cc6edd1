"""The detection benchmarks (MLPerf Training ssd: RetinaNet on OpenImages; maskrcnn: Mask R-CNN on
COCO), plus CPU tiers on generated mosaics: one package, two workloads sharing data, models and
evaluation."""

# the third-party modules its runs import, most imported only then: without one of them the
# registry leaves the benchmark out (workload/registry.py)
REQUIRES = ("torchvision", "pycocotools", "faster_coco_eval")  # the detectors, COCO masks, mAP

from trainclock.workloads.detection.workload import DetectionWorkload

WORKLOADS = (DetectionWorkload("ssd", "RetinaNet", "--data DIR --backbone-weights resnext50_32x4d.pth"),
             DetectionWorkload("maskrcnn", "Mask R-CNN", "--data DIR --backbone-weights resnet50.pth"))
