import pytest
import torch

from trainclock.workloads.gpt3.model import GPT, GPTShape
from trainclock.workloads.gpt3.spec import MEMBERS, get_member

# GPT-3 paper, Table 2.1: n_params, n_layers, d_model, n_heads (heads fixed where the paper's don't divide)
PAPER = {
    "gpt3-125m": (125e6, 12, 768),
    "gpt3-350m": (350e6, 24, 1024),
    "gpt3-760m": (760e6, 24, 1536),
    "gpt3-1.3b": (1.3e9, 24, 2048),
    "gpt3-2.7b": (2.7e9, 32, 2560),
    "gpt3-6.7b": (6.7e9, 32, 4096),
    "gpt3-13b": (13.0e9, 40, 5120),
    "gpt3-175b": (175.0e9, 96, 12288),
}


def test_175b_has_the_gpt3_shape_and_parameter_count():
    s = get_member("gpt3-175b").shape
    assert (s.n_layer, s.d_model, s.n_head, s.context) == (96, 12288, 96, 2048)
    assert s.parameter_count() == pytest.approx(174.6e9, rel=0.005)


@pytest.mark.parametrize("name", PAPER)
def test_paper_members_match_the_paper(name):
    params, layers, width = PAPER[name]
    s = get_member(name).shape
    assert (s.n_layer, s.d_model) == (layers, width)
    assert s.parameter_count() == pytest.approx(params, rel=0.03)
    assert s.d_ffn == 4 * s.d_model


def test_parameter_count_formula_matches_the_built_model():
    shape = GPTShape(n_layer=3, d_model=64, n_head=4, context=32, vocab_size=300)
    model = GPT(shape)
    assert sum(p.numel() for p in model.parameters()) == shape.parameter_count()


def test_cpu_members_have_the_advertised_size():
    assert get_member("gpt3-tiny").shape.parameter_count() == pytest.approx(1e6, rel=0.2)
    assert get_member("gpt3-mini").shape.parameter_count() == pytest.approx(10e6, rel=0.2)


def test_output_embedding_is_tied_and_attention_is_causal():
    torch.manual_seed(0)
    model = GPT(GPTShape(n_layer=2, d_model=32, n_head=2, context=16, vocab_size=50)).eval()
    x = torch.randint(0, 50, (1, 16))
    changed = x.clone()
    changed[0, 10] = (x[0, 10] + 1) % 50
    with torch.no_grad():
        a, b = model(x), model(changed)
    assert torch.equal(a[0, :10], b[0, :10])  # the past cannot see the future
    assert not torch.equal(a[0, 10:], b[0, 10:])
    assert a.shape == (1, 16, 50)
    with torch.no_grad():
        model.tok_emb.weight[3].add_(1.0)
    assert not torch.equal(model(x)[..., 3], a[..., 3])  # the output head reads the embedding


def test_loss_at_init_is_near_uniform():
    torch.manual_seed(0)
    model = GPT(GPTShape(n_layer=2, d_model=32, n_head=2, context=16, vocab_size=500))
    x, y = torch.randint(0, 500, (2, 4, 16))
    assert model(x, y).item() == pytest.approx(torch.log(torch.tensor(500.0)).item(), rel=0.05)


def test_flops_per_token_is_6n_plus_attention():
    s = GPTShape(n_layer=2, d_model=32, n_head=2, context=16, vocab_size=50)
    assert s.flops_per_token() == 6 * s.parameter_count(include_positions=False) + 12 * 2 * 32 * 16


def test_every_member_has_a_target_and_source():
    for spec in MEMBERS.values():
        assert 1.0 < spec.quality[0].threshold < 10
        assert spec.target_source.split(":")[0] in ("mlperf", "measured", "estimated")
