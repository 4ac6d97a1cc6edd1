"""DLRM under --compile: inductor cannot compile sparse gradients ("Cannot access storage of
SparseTensorImpl"), so the table lookups stay out of the graph and the MLPs around them compile;
two compiled steps train the tables through their sparse gradients."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from trainclock.optim.adagrad import Adagrad
from trainclock.workloads.dlrm_dcnv2.model import build_model
from trainclock.workloads.dlrm_dcnv2.spec import DENSE_FEATURES, get_member


@pytest.mark.slow  # inductor compiles the MLPs: about 12 s
def test_the_compiled_model_trains_its_tables_through_sparse_gradients():
    spec = get_member("dlrm-tiny")
    torch.manual_seed(0)
    model = build_model(spec.shape)
    optimizer = Adagrad(spec.learning_rate).build(model)
    compiled = torch.compile(model)
    ids = torch.cat([torch.randint(0, n, (8, hot)) for n, hot in zip(spec.shape.rows, spec.shape.multi_hot)], dim=1)
    before = model.tables.tables()[0].weight.detach().clone()
    for _ in range(2):
        logits = compiled(torch.randn(8, DENSE_FEATURES), ids)
        F.binary_cross_entropy_with_logits(logits, torch.ones(8)).backward()
        assert model.tables.tables()[0].weight.grad.is_sparse
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    assert not torch.equal(model.tables.tables()[0].weight.detach(), before)
