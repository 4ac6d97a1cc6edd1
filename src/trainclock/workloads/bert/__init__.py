"""The BERT benchmark family (MLPerf Training bert: BERT-Large, plus CPU tiers)."""

# the third-party modules its runs import, most imported only then: without one of them the
# registry leaves the benchmark out (workload/registry.py)
REQUIRES = ("transformers", "tokenizers")  # the model, the tiers' WordPiece vocabulary

from trainclock.workloads.bert.workload import BertWorkload

WORKLOAD = BertWorkload()
