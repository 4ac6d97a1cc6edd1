"""The 3D U-Net benchmark family (MLPerf Training unet3d: KiTS19 kidney tumour segmentation, plus CPU tiers)."""

# the third-party modules its runs import, most imported only then: without one of them the
# registry leaves the benchmark out (workload/registry.py)
REQUIRES = ("scipy",)  # the patch sampler's connected components

from trainclock.workloads.unet3d.workload import Unet3DWorkload

WORKLOAD = Unet3DWorkload()
