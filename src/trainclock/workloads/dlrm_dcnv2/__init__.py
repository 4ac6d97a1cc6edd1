"""The DLRM-DCNv2 benchmark family (MLPerf Training dlrm_dcnv2: Criteo 1TB multi-hot, plus CPU tiers)."""

from trainclock.workloads.dlrm_dcnv2.workload import DlrmWorkload

WORKLOAD = DlrmWorkload()
