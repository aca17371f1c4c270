"""Layer 3: properties of the losses that must hold for any input (hypothesis).

Each test states one invariance or sign the maths guarantees: the DPO loss at the reference, the
antisymmetry of chosen/rejected, centred group advantages, k3's sign, where PPO-style clipping
stops the gradient, that padding never leaks into the loss, finiteness at extreme log-probs, and
that bad input fails early with a ValueError naming the argument.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import alignlings
from alignlings import DPO_LOSSES, GRPO_AGGREGATIONS

SETTINGS = settings(max_examples=50, deadline=None)
F64 = torch.float64
GRPO_LOSS_TYPES = sorted(GRPO_AGGREGATIONS)


# tiny tensors: a second torch thread costs more than it saves (see conftest.one_torch_thread)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def floats(lo: float, hi: float):
    return st.floats(min_value=lo, max_value=hi, allow_nan=False, allow_infinity=False)


def vec(n: int, lo: float, hi: float, dtype=F64) -> st.SearchStrategy[torch.Tensor]:
    return st.lists(floats(lo, hi), min_size=n, max_size=n).map(lambda xs: torch.tensor(xs, dtype=dtype))


@st.composite
def dpo_batches(draw, lo=-100.0, dtype=F64):
    """Four [B] summed log-probs in [lo, 0] and completion lengths [B] in 1..64."""
    B = draw(st.integers(1, 6))
    pc, pr, rc, rr = (draw(vec(B, lo, 0.0, dtype)) for _ in range(4))
    lengths = st.lists(st.integers(1, 64), min_size=B, max_size=B).map(lambda xs: torch.tensor(xs))
    return pc, pr, rc, rr, draw(lengths), draw(lengths)


def smoothing_for(loss_type: str) -> float:
    # exo_pair needs eps > 0, robust eps < 0.5; the others read it or ignore it
    return 0.1 if loss_type in ("exo_pair", "robust", "aot", "aot_unpaired") else 0.0


@st.composite
def grpo_batches(draw, lo=-20.0, max_log_ratio=1.0, dtype=F64):
    """logps, old, ref [B, T], advantages [B] and a 0/1 mask with at least one token per row."""
    B, T = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    logps = draw(vec(B * T, lo, 0.0, dtype)).reshape(B, T)
    old = logps + draw(vec(B * T, -max_log_ratio, max_log_ratio, dtype)).reshape(B, T)
    ref = logps + draw(vec(B * T, -max_log_ratio, max_log_ratio, dtype)).reshape(B, T)
    adv = draw(vec(B, -3.0, 3.0, dtype))
    mask = torch.tensor(draw(st.lists(st.booleans(), min_size=B * T, max_size=B * T))).reshape(B, T)
    first = torch.tensor(draw(st.lists(st.integers(0, T - 1), min_size=B, max_size=B)))
    mask[torch.arange(B), first] = True
    return logps, old, ref, adv, mask.to(dtype)


# ------------------------------------------------------------------------------------------ DPO


@SETTINGS
@given(dpo_batches(lo=-1e3), floats(0.01, 5.0))
def test_dpo_sigmoid_is_log2_when_policy_equals_reference(batch, beta):
    pc, pr, _, _, _, _ = batch
    loss = alignlings.dpo_loss(pc, pr, pc.clone(), pr.clone(), beta=beta, reduction="none")
    torch.testing.assert_close(loss, torch.full_like(loss, math.log(2.0)), rtol=0, atol=1e-12)


@SETTINGS
@given(dpo_batches(), floats(0.01, 5.0))
def test_swapping_chosen_and_rejected_flips_the_margin(batch, beta):
    pc, pr, rc, rr, _, _ = batch
    metrics = alignlings.dpo_metrics(pc, pr, rc, rr, beta=beta)
    swapped = alignlings.dpo_metrics(pr, pc, rr, rc, beta=beta)
    assert swapped["rewards/margins"] == pytest.approx(-metrics["rewards/margins"], abs=1e-9)
    assert swapped["rewards/chosen"] == pytest.approx(metrics["rewards/rejected"], abs=1e-12)

    # sigmoid: the swapped pair's loss is the loss at -Delta, -log sigma(-beta*Delta) = log(1 + exp(beta*Delta))
    swapped_loss = alignlings.dpo_loss(pr, pc, rr, rc, beta=beta, reduction="none")
    for i in range(pc.shape[0]):
        delta = (pc[i].item() - rc[i].item()) - (pr[i].item() - rr[i].item())
        m = beta * delta
        expected = max(m, 0.0) + math.log1p(math.exp(-abs(m)))  # log(1 + exp(m)), without overflow
        assert swapped_loss[i].item() == pytest.approx(expected, rel=1e-9, abs=1e-12)


@SETTINGS
@given(dpo_batches(lo=-1e4, dtype=torch.float32), floats(0.01, 1.0))
def test_dpo_losses_are_finite_down_to_minus_1e4(batch, beta):
    """Summed log-probs anywhere in [-1e4, 0] (so |Delta| up to 2e4): no NaN or inf in loss or gradient."""
    pc, pr, rc, rr, chosen_len, rejected_len = batch
    for loss_type in DPO_LOSSES:
        pc_, pr_ = pc.clone().requires_grad_(), pr.clone().requires_grad_()
        loss = alignlings.dpo_loss(pc_, pr_, rc, rr, beta=beta, loss_type=loss_type,
                                   label_smoothing=smoothing_for(loss_type),
                                   chosen_lengths=chosen_len, rejected_lengths=rejected_len)
        loss.backward()
        assert torch.isfinite(loss), (loss_type, loss)
        assert torch.isfinite(pc_.grad).all() and torch.isfinite(pr_.grad).all(), (loss_type, pc_.grad, pr_.grad)


# ----------------------------------------------------------------------------------- advantages


@SETTINGS
@given(st.integers(1, 4), st.integers(2, 16), st.data())
def test_advantages_have_zero_mean_per_group(P, G, data):
    rewards = data.draw(vec(P * G, -10.0, 10.0)).reshape(P, G)
    for scale_rewards in ("group", "batch", "none"):
        adv = alignlings.grpo_advantages(rewards, scale_rewards=scale_rewards)
        assert adv.shape == (P, G)
        torch.testing.assert_close(adv.mean(dim=-1), torch.zeros(P, dtype=F64), rtol=0, atol=1e-9)


@SETTINGS
@given(st.integers(2, 128), floats(-10.0, 10.0))
def test_a_flat_group_has_zero_advantages(G, value):
    rewards = torch.full((G,), value, dtype=F64)
    for scale_rewards in ("group", "none"):
        adv = alignlings.grpo_advantages(rewards, scale_rewards=scale_rewards)
        torch.testing.assert_close(adv, torch.zeros(G, dtype=F64), rtol=0, atol=1e-9)


# ---------------------------------------------------------------------------------------- k3


@SETTINGS
@given(st.integers(1, 64), st.sampled_from([torch.float32, torch.float64]), st.data())
def test_k3_is_never_negative_and_zero_only_when_equal(n, dtype, data):
    logps = data.draw(vec(n, -50.0, 0.0, dtype))
    ref = data.draw(vec(n, -50.0, 0.0, dtype))
    # some tokens equal, some a hair apart (where exp(x) - x - 1 cancels catastrophically)
    ref[::3] = logps[::3]
    # uniform draws (hypothesis favours round floats, which rarely hit the cancellation)
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31)))
    ref[1::3] = logps[1::3] + 2e-3 * (torch.rand(len(ref[1::3]), generator=g, dtype=dtype) - 0.5)
    k3 = alignlings.kl_penalty(logps, ref, "k3")
    assert (k3 >= 0).all(), k3
    equal = ref == logps
    assert (k3[equal] == 0).all()
    far = (ref - logps).abs() >= 1e-3
    assert (k3[far] > 0).all()


# ------------------------------------------------------------------------------------- clipping


# log-ratio regions, with a margin of 0.01 around the clip edges log(0.8) and log(1.2)
BELOW = (-3.0, math.log(0.8) - 0.01)
INSIDE = (math.log(0.8) + 0.01, math.log(1.2) - 0.01)
ABOVE = (math.log(1.2) + 0.01, 3.0)


@SETTINGS
@given(st.integers(1, 4), st.integers(1, 6), st.data())
def test_clipping_zeroes_the_gradient_only_on_the_side_it_clips(B, T, data):
    """ratio > 1+eps with A > 0, or ratio < 1-eps with A < 0: the clipped term wins the min and has no
    gradient. Inside the trust region, or outside it on the other side, the gradient is not zero."""
    region = torch.tensor(data.draw(st.lists(st.sampled_from([0, 1, 2]), min_size=B * T, max_size=B * T)))
    region = region.reshape(B, T)
    log_ratio = torch.empty(B, T, dtype=F64)
    for r, (lo, hi) in enumerate((BELOW, INSIDE, ABOVE)):
        n = int((region == r).sum())
        log_ratio[region == r] = data.draw(vec(n, lo, hi))
    sign = torch.tensor(data.draw(st.lists(st.sampled_from([-1.0, 1.0]), min_size=B * T, max_size=B * T)))
    adv = sign.reshape(B, T).to(F64) * data.draw(vec(B * T, 0.01, 3.0)).reshape(B, T)  # per-token advantages
    old = data.draw(vec(B * T, -20.0, 0.0)).reshape(B, T)

    clipped = ((region == 2) & (adv > 0)) | ((region == 0) & (adv < 0))
    for loss_type in GRPO_LOSS_TYPES:
        logps = (old + log_ratio).requires_grad_()
        loss = alignlings.grpo_loss(logps, old, None, adv, loss_type=loss_type, epsilon=0.2,
                                    max_completion_length=T)
        (grad,) = torch.autograd.grad(loss, logps)
        assert (grad[clipped] == 0).all(), (loss_type, grad, region, adv)
        assert (grad[~clipped] != 0).all(), (loss_type, grad, region, adv)


@SETTINGS
@given(st.integers(1, 4), st.integers(1, 6), st.sampled_from([-1.0, 1.0]), st.sampled_from([0, 1, 2]), st.data())
def test_sequence_level_clipping_zeroes_the_whole_sequence(B, T, sign, region, data):
    """GSPO clips the sequence ratio exp(mean log-ratio): every token of a clipped sequence has zero gradient."""
    lo, hi = (BELOW, INSIDE, ABOVE)[region]
    seq_log_ratio = data.draw(vec(B, lo, hi)).unsqueeze(1)  # [B, 1]
    noise = data.draw(vec(B * T, -0.5, 0.5)).reshape(B, T)
    noise = noise - noise.mean(dim=1, keepdim=True)  # keeps each sequence's mean log-ratio
    old = data.draw(vec(B * T, -20.0, 0.0)).reshape(B, T)
    adv = sign * data.draw(vec(B, 0.01, 3.0))
    logps = (old + seq_log_ratio + noise).requires_grad_()
    loss = alignlings.grpo_loss(logps, old, None, adv, importance_sampling_level="sequence", loss_type="bnpo")
    (grad,) = torch.autograd.grad(loss, logps)
    clipped = (region == 2 and sign > 0) or (region == 0 and sign < 0)
    if clipped:
        assert (grad == 0).all(), grad
    else:
        assert (grad.abs().sum(dim=1) > 0).all(), grad


# ------------------------------------------------------------------------------------- masking


@SETTINGS
@given(grpo_batches(), grpo_batches(), st.sampled_from([0.0, 0.04]), st.booleans(), st.data())
def test_masked_tokens_never_affect_the_loss_or_gradient(batch, other, beta, bias_kl, data):
    logps, old, ref, adv, mask = batch
    B, T = logps.shape
    # values to write into the masked positions (drawn independently of the real ones)
    fill = data.draw(vec(B * T, -20.0, 0.0)).reshape(B, T)
    keep = mask.bool()
    logps2 = torch.where(keep, logps, fill)
    old2 = torch.where(keep, old, fill + data.draw(floats(-1.0, 1.0)))
    ref2 = torch.where(keep, ref, fill - data.draw(floats(-1.0, 1.0)))
    for loss_type in GRPO_LOSS_TYPES:
        for level in ("token", "sequence"):
            kwargs = dict(loss_type=loss_type, beta=beta, importance_sampling_level=level,
                          use_bias_correction_kl=bias_kl, max_completion_length=T, epsilon_high=0.28, delta=1.5)
            a = logps.clone().requires_grad_()
            b = logps2.clone().requires_grad_()
            loss_a = alignlings.grpo_loss(a, old, ref, adv, mask, **kwargs)
            loss_b = alignlings.grpo_loss(b, old2, ref2, adv, mask, **kwargs)
            torch.testing.assert_close(loss_a, loss_b, rtol=1e-12, atol=1e-12, msg=f"{kwargs}")
            (grad_a,) = torch.autograd.grad(loss_a, a)
            (grad_b,) = torch.autograd.grad(loss_b, b)
            assert (grad_a[~keep] == 0).all() and (grad_b[~keep] == 0).all(), kwargs
            torch.testing.assert_close(grad_a, grad_b, rtol=1e-12, atol=1e-12, msg=f"{kwargs}")


@SETTINGS
@given(grpo_batches(lo=-1e4, max_log_ratio=20.0, dtype=torch.float32), st.sampled_from([0.0, 0.04]), st.booleans())
def test_grpo_losses_are_finite_down_to_minus_1e4(batch, beta, bias_kl):
    """Per-token log-probs anywhere in [-1e4, 0]: no NaN or inf in loss or gradient.

    The policy, its sampling-time copy and the reference are drawn within 20 nats of each other per
    token. TRL 1.16 does not clamp the log-ratio (trl-facts), so neither do we: a log-ratio beyond ~88
    overflows exp in float32 in both (verl clamps it to +-20 for this reason).
    """
    logps, old, ref, adv, mask = batch
    for loss_type in GRPO_LOSS_TYPES:
        for level in ("token", "sequence"):
            x = logps.clone().requires_grad_()
            loss = alignlings.grpo_loss(x, old, ref, adv, mask, loss_type=loss_type, beta=beta,
                                        importance_sampling_level=level, use_bias_correction_kl=bias_kl,
                                        max_completion_length=logps.shape[1])
            (grad,) = torch.autograd.grad(loss, x)
            assert torch.isfinite(loss), (loss_type, level, loss)
            assert torch.isfinite(grad).all(), (loss_type, level, grad)


# ---------------------------------------------------------------------------------- bad input


def raises_naming(name: str):
    """A ValueError whose message names the argument (messages start with 'name: ...')."""
    return pytest.raises(ValueError, match=rf"(^|\W){re.escape(name)}\W")


@SETTINGS
@given(st.integers(1, 6), st.integers(1, 3), st.sampled_from([1, 2, 3]))
def test_dpo_mismatched_shapes_name_the_argument(B, extra, which):
    args = [torch.zeros(B) for _ in range(4)]
    args[which] = torch.zeros(B + extra)
    names = ["policy_chosen_logps", "policy_rejected_logps", "ref_chosen_logps", "ref_rejected_logps"]
    with raises_naming(names[which]):
        alignlings.dpo_loss(*args)


def test_dpo_bad_input_names_the_argument():
    z = torch.zeros(3)
    with raises_naming("policy_chosen_logps"):
        alignlings.dpo_loss([0.0, 1.0, 2.0], z, z, z)
    with raises_naming("policy_chosen_logps"):
        alignlings.dpo_loss(torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3, 2))
    with raises_naming("loss_type"):
        alignlings.dpo_loss(z, z, z, z, loss_type="simpo")
    for loss_type in ("ipo", "sigmoid_norm"):
        with raises_naming("chosen_lengths"):
            alignlings.dpo_loss(z, z, z, z, loss_type=loss_type)
        with raises_naming("rejected_lengths"):
            alignlings.dpo_loss(z, z, z, z, loss_type=loss_type, chosen_lengths=torch.ones(3))
        with raises_naming("chosen_lengths"):
            alignlings.dpo_loss(z, z, z, z, loss_type=loss_type, chosen_lengths=torch.ones(4),
                                rejected_lengths=torch.ones(3))
    with raises_naming("label_smoothing"):
        alignlings.dpo_loss(z, z, z, z, loss_type="exo_pair")
    with raises_naming("beta"):
        alignlings.dpo_loss(z, z, z, z, beta=0.0)


@SETTINGS
@given(st.integers(1, 4), st.integers(1, 6), st.integers(1, 3))
def test_grpo_mismatched_shapes_name_the_argument(B, T, extra):
    logps, adv = torch.zeros(B, T), torch.zeros(B)
    with raises_naming("old_logps"):
        alignlings.grpo_loss(logps, torch.zeros(B, T + extra), None, adv)
    with raises_naming("ref_logps"):
        alignlings.grpo_loss(logps, None, torch.zeros(B + extra, T), adv, beta=0.04)
    with raises_naming("ref_logps"):
        alignlings.grpo_loss(logps, None, None, adv, beta=0.04)
    with raises_naming("mask"):
        alignlings.grpo_loss(logps, None, None, adv, torch.ones(B, T + extra))
    with raises_naming("mask"):
        alignlings.grpo_loss(logps, None, None, adv, torch.ones(B * T))
    with raises_naming("advantages"):
        alignlings.grpo_loss(logps, None, None, torch.zeros(B + extra))
    with raises_naming("ref_logps"):
        alignlings.kl_penalty(logps, torch.zeros(B, T + extra))


def test_grpo_bad_choices_name_the_argument():
    logps, adv = torch.zeros(2, 3), torch.zeros(2)
    with raises_naming("loss_type"):
        alignlings.grpo_loss(logps, None, None, adv, loss_type="ppo")
    with raises_naming("importance_sampling_level"):
        alignlings.grpo_loss(logps, None, None, adv, importance_sampling_level="batch")
    with raises_naming("max_completion_length"):
        alignlings.grpo_loss(logps, None, None, adv, loss_type="dr_grpo")
    with raises_naming("scale_rewards"):
        alignlings.grpo_advantages([1.0, 0.0], scale_rewards="max")
    with raises_naming("estimator"):
        alignlings.kl_penalty(logps, logps, "k4")


@SETTINGS
@given(st.integers(1, 5), floats(-10.0, 10.0))
def test_group_size_one_with_std_scaling_names_the_argument(P, value):
    rewards = torch.full((P, 1), value)
    with raises_naming("rewards"):
        alignlings.grpo_advantages(rewards, scale_rewards="group")
    with raises_naming("rewards"):
        alignlings.grpo_advantages([value], scale_rewards="batch")
    # without std scaling a single generation is allowed (its advantage is 0)
    assert (alignlings.grpo_advantages(rewards, scale_rewards="none") == 0).all()


def test_grpo_metrics_on_policy_is_the_general_computation_with_old_equal_to_new():
    """With no old log-probs (one iteration per batch) the clip fractions are 0 without computing
    them: the same values the general path gives for old = new, NaN and -inf log-probs included,
    at token and sequence level, with the KL still computed when a reference is given."""
    from alignlings.losses.grpo import grpo_metrics

    g = torch.Generator().manual_seed(0)
    logps = -torch.rand(4, 6, generator=g) * 3
    logps[0, 1], logps[1, 2] = float("nan"), float("-inf")
    ref = logps.detach() - torch.rand(4, 6, generator=g) * 0.1
    advantages = torch.tensor([1.0, -1.0, 0.5, -0.5])
    mask = (torch.rand(4, 6, generator=g) > 0.3).float()
    for level in ("token", "sequence"):
        for r in (None, ref):
            fast = grpo_metrics(logps, None, r, advantages, mask, epsilon=0.2, importance_sampling_level=level)
            general = grpo_metrics(logps, logps.clone(), r, advantages, mask, epsilon=0.2,
                                   importance_sampling_level=level)
            assert fast.keys() == general.keys()
            for key in fast:
                assert fast[key] == general[key] or (fast[key] != fast[key] and general[key] != general[key]), key
            assert fast["clip_ratio/region_mean"] == 0.0
