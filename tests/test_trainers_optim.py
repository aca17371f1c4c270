"""``trainers.optim``: gradient clipping and the fused AdamW step without torch.optim's Python work
must give bitwise what ``clip_grad_norm_`` and ``AdamW(fused=True).step()`` give, and step aside
wherever they do not apply."""

from __future__ import annotations

import warnings

import pytest
import torch

from alignlings.trainers.optim import clip_grad_norm, fused_adamw_step

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _params(seed: int = 0) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(*shape, generator=g)) for shape in ((7, 5), (5,), (3, 4, 2), (1,))]


def _set_grads(params, seed: int, scale: float = 1.0) -> None:
    g = torch.Generator().manual_seed(seed)
    for p in params:
        p.grad = torch.randn(p.shape, generator=g) * scale


@pytest.mark.parametrize("scale, max_norm", [(1.0, 1.0), (0.01, 1.0), (3.0, 0.5), (1.0, float("inf"))])
def test_clip_grad_norm_is_torchs(scale, max_norm):
    ours, theirs = _params(), _params()
    _set_grads(ours, 1, scale)
    _set_grads(theirs, 1, scale)
    got = clip_grad_norm(ours, max_norm)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm)
    assert torch.equal(got, expected)
    for a, b in zip(ours, theirs):
        assert torch.equal(a.grad, b.grad)


def _adamw(params):
    decay, no_decay = params[::2], params[1::2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                             lr=1e-2, betas=(0.9, 0.95), eps=1e-7, fused=True)


def test_fused_adamw_step_is_torchs_step_bitwise_across_a_reload():
    ours, theirs = _params(), _params()
    opt_a, opt_b = _adamw(ours), _adamw(theirs)
    sched_a = torch.optim.lr_scheduler.LambdaLR(opt_a, lambda s: 1.0 / (s + 1))
    sched_b = torch.optim.lr_scheduler.LambdaLR(opt_b, lambda s: 1.0 / (s + 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "lr_scheduler.step() before optimizer.step()" warning
        for step in range(6):
            for params in (ours, theirs):
                _set_grads(params, 10 + step)
            assert fused_adamw_step(opt_a) == (step > 0)  # the first step (no state yet) is torch's
            if step == 0:
                opt_a.step()
            opt_b.step()
            sched_a.step()
            sched_b.step()
            if step == 3:  # a checkpoint reload replaces the state tensors: the next step reads the new ones
                opt_a.load_state_dict(opt_a.state_dict())
            for p, q in zip(ours, theirs):
                assert torch.equal(p, q)
                sa, sb = opt_a.state[p], opt_b.state[q]
                for key in ("exp_avg", "exp_avg_sq", "step"):
                    assert torch.equal(sa[key], sb[key]), key


@pytest.mark.parametrize("kind", ["not fused", "amsgrad", "hook", "adam"])
def test_fused_adamw_step_steps_aside(kind):
    params = _params()
    if kind == "adam":
        opt = torch.optim.Adam(params, fused=True)
    else:
        opt = torch.optim.AdamW(params, fused=kind != "not fused", amsgrad=kind == "amsgrad")
    _set_grads(params, 1)
    opt.step()  # creates the state
    if kind == "hook":
        opt.register_step_pre_hook(lambda *a: None)
    before = [p.detach().clone() for p in params]
    assert fused_adamw_step(opt) is False
    assert all(torch.equal(p, b) for p, b in zip(params, before))  # nothing done
