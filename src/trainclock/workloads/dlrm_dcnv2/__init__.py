"""The DLRM-DCNv2 benchmark family (MLPerf Training dlrm_dcnv2: Criteo 1TB multi-hot, plus CPU tiers)."""

# the third-party modules its runs import, most imported only then: without one of them the
# registry leaves the benchmark out (workload/registry.py)
REQUIRES = ("torchmetrics",)  # AUC

from trainclock.workloads.dlrm_dcnv2.workload import DlrmWorkload

WORKLOAD = DlrmWorkload()
