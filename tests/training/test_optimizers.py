import numpy
import pytest
import torch

from ipuflow.config import ConfigurationError, Params
from ipuflow.training import Optimizer
from ipuflow.training.optim.lamb import Lamb


class ThreeLayers(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = torch.nn.Linear(3, 3)
        self.encoder = torch.nn.Linear(3, 3)
        self.head = torch.nn.Linear(3, 1)


def named(model: torch.nn.Module):
    return list(model.named_parameters())


def test_every_registered_optimizer_builds_from_config():
    expected = {"adam", "adamw", "sgd", "rmsprop", "adagrad", "adadelta", "adamax", "sparse_adam", "lamb"}
    assert expected <= set(Optimizer.list_available())
    assert Optimizer.list_available()[0] == "adam"
    for name in expected:
        config = {"type": name, "lr": 0.1} if name == "sgd" else {"type": name}
        optimizer = Optimizer.from_params(Params(config), model_parameters=named(ThreeLayers()))
        assert isinstance(optimizer, torch.optim.Optimizer)
    default = Optimizer.from_params(Params({}), model_parameters=named(ThreeLayers()))
    assert isinstance(default, torch.optim.Adam)


def test_parameter_groups_override_options_and_leave_a_default_group():
    model = ThreeLayers()
    optimizer = Optimizer.from_params(
        Params({"type": "sgd", "lr": 1.0, "momentum": 0.5,
                "parameter_groups": [[["^embedding"], {"lr": 2.0}], [["^encoder"], {"lr": 3.0}]]}),
        model_parameters=named(model),
    )
    assert [group["lr"] for group in optimizer.param_groups] == [2.0, 3.0, 1.0]
    assert all(group["momentum"] == 0.5 for group in optimizer.param_groups)
    assert optimizer.param_groups[2]["params"] == [model.head.weight, model.head.bias]


def test_a_parameter_in_two_groups_is_an_error():
    with pytest.raises(ConfigurationError, match="encoder.weight.*matches group 0 and group 1"):
        Optimizer.from_params(
            Params({"parameter_groups": [[["weight"], {}], [["^encoder"], {"lr": 3.0}]]}),
            model_parameters=named(ThreeLayers()),
        )


def test_requires_grad_false_freezes_the_group():
    model = ThreeLayers()
    optimizer = Optimizer.from_params(
        Params({"parameter_groups": [[["^embedding"], {"requires_grad": False}]]}), model_parameters=named(model)
    )
    assert not model.embedding.weight.requires_grad and not model.embedding.bias.requires_grad
    assert len(optimizer.param_groups) == 1
    assert all(p.requires_grad for p in optimizer.param_groups[0]["params"])
    assert len(optimizer.param_groups[0]["params"]) == 4


def paper_lamb_step(w, g, m, v, t, lr, b1, b2, eps, wd):
    """Algorithm 2 of You et al. (2019) for one tensor, in float64 numpy."""
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    m_hat = m / (1 - b1**t)
    v_hat = v / (1 - b2**t)
    r = m_hat / (numpy.sqrt(v_hat) + eps)
    u = r + wd * w
    trust = numpy.linalg.norm(w) / numpy.linalg.norm(u)
    return w - lr * trust * u, m, v


def test_lamb_matches_the_papers_update():
    rng = numpy.random.default_rng(0)
    w0 = rng.normal(size=(3, 2))
    grads = [rng.normal(size=(3, 2)) for _ in range(3)]
    param = torch.nn.Parameter(torch.tensor(w0, dtype=torch.float64))
    optimizer = Lamb([param], lr=0.1, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.01)
    w, m, v = w0.copy(), numpy.zeros_like(w0), numpy.zeros_like(w0)
    for t, g in enumerate(grads, 1):
        param.grad = torch.tensor(g, dtype=torch.float64)
        optimizer.step()
        w, m, v = paper_lamb_step(w, g, m, v, t, 0.1, 0.9, 0.99, 1e-6, 0.01)
        numpy.testing.assert_allclose(param.detach().numpy(), w, rtol=1e-12, atol=1e-12)


def test_lamb_trust_ratio_is_one_for_zero_weights_and_clipped_by_max_weight_norm():
    param = torch.nn.Parameter(torch.zeros(4, dtype=torch.float64))
    optimizer = Lamb([param], lr=0.5, weight_decay=0.0)
    param.grad = torch.ones(4, dtype=torch.float64)
    optimizer.step()
    # Adam's first bias-corrected step is ±1 per element; a zero weight norm means trust ratio 1.
    numpy.testing.assert_allclose(param.detach().numpy(), -0.5 * numpy.ones(4), rtol=1e-6)

    param = torch.nn.Parameter(torch.full((4,), 10.0, dtype=torch.float64))
    optimizer = Lamb([param], lr=1.0, weight_decay=0.0, max_weight_norm=1.0)
    param.grad = torch.ones(4, dtype=torch.float64)
    optimizer.step()
    # ||u|| = 2, φ(||w||) = min(20, 1) = 1 → each element moves by 1 · 1/2.
    numpy.testing.assert_allclose(param.detach().numpy(), numpy.full(4, 9.5), rtol=1e-6)
