"""The BERT benchmark family (MLPerf Training bert: BERT-Large, plus CPU tiers)."""

from trainclock.workloads.bert.workload import BertWorkload

WORKLOAD = BertWorkload()
