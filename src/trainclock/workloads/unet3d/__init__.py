"""The 3D U-Net benchmark family (MLPerf Training unet3d: KiTS19 kidney tumour segmentation, plus CPU tiers)."""

from trainclock.workloads.unet3d.workload import Unet3DWorkload

WORKLOAD = Unet3DWorkload()
