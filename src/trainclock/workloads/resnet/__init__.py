"""The ResNet benchmark family (MLPerf Training resnet: ResNet-50 v1.5 on ImageNet, plus CPU tiers)."""

from trainclock.workloads.resnet.workload import ResNetWorkload

WORKLOAD = ResNetWorkload()
