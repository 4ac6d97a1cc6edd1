"""The ResNet benchmark family (MLPerf Training resnet: ResNet-50 v1.5 on ImageNet, plus CPU tiers)."""

# the third-party modules its runs import, most imported only then: without one of them the
# registry leaves the benchmark out (workload/registry.py)
REQUIRES = ("torchvision", "torchmetrics")  # the model and image transforms, top-1 accuracy

from trainclock.workloads.resnet.workload import ResNetWorkload

WORKLOAD = ResNetWorkload()
