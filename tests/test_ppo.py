"""PPO pieces (``kl_shaped_rewards``, ``gae``, ``ppo_value_loss``, ``ppo_policy_loss``) against an
independent per-token loop in plain Python, hand-worked figures, and properties.

TRL 1.16 has no PPO trainer, so there is no anchor code to call; the loop below is written from the
papers' formulas (Schulman et al. 2016, eq. 16; Ziegler et al. 2019; Huang et al. 2024), one sequence
and one token at a time, with no tensor code shared with the library.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from alignlings import gae, grpo_loss, kl_shaped_rewards, ppo_policy_loss, ppo_policy_metrics, ppo_value_loss

pytestmark = pytest.mark.usefixtures("one_torch_thread")
DTYPE = torch.float64


# ---------------------------------------------------------------------------------------------
# the independent loop
# ---------------------------------------------------------------------------------------------


def loop_gae(rewards, values, mask, gamma, lam):
    """One row at a time: collect the real positions, run the recursion over them, write back."""
    adv_out, ret_out = [], []
    for r, v, m in zip(rewards, values, mask):
        real = [t for t, x in enumerate(m) if x]
        adv = [0.0] * len(m)
        ret = [0.0] * len(m)
        running = 0.0
        for k in range(len(real) - 1, -1, -1):
            t = real[k]
            v_next = v[real[k + 1]] if k + 1 < len(real) else 0.0  # nothing is bootstrapped past the end
            delta = r[t] + gamma * v_next - v[t]
            running = delta + gamma * lam * running
            adv[t] = running
            ret[t] = running + v[t]
        adv_out.append(adv)
        ret_out.append(ret)
    return adv_out, ret_out


def loop_kl_shaped(scores, logps, ref_logps, mask, kl_coef, estimator):
    out = []
    for s, lp, rp, m in zip(scores, logps, ref_logps, mask):
        row = []
        for a, b, x in zip(lp, rp, m):
            log_r = b - a
            kl = {"k1": -log_r, "k2": 0.5 * log_r * log_r, "k3": math.exp(log_r) - 1 - log_r}[estimator]
            row.append(-kl_coef * kl if x else 0.0)
        last = max(t for t, x in enumerate(m) if x)
        row[last] += s
        out.append(row)
    return out


def loop_value_loss(values, old_values, returns, mask, c):
    total, count = 0.0, 0
    for vr, orow, rr, m in zip(values, old_values, returns, mask):
        for v, o, R, x in zip(vr, orow, rr, m):
            if x:
                clipped = min(max(v, o - c), o + c)
                total += 0.5 * max((v - R) ** 2, (clipped - R) ** 2)
                count += 1
    return total / count


def loop_policy_loss(logps, old_logps, adv, mask, c):
    total, count = 0.0, 0
    for lr, orow, ar, m in zip(logps, old_logps, adv, mask):
        for lp, o, a, x in zip(lr, orow, ar, m):
            if x:
                ratio = math.exp(lp - o)
                total += -min(ratio * a, min(max(ratio, 1 - c), 1 + c) * a)
                count += 1
    return total / count


def _batch(seed, B=4, T=7, left_pad=False):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    lengths[0] = T
    pos = torch.arange(T).expand(B, T)
    mask = (pos >= T - lengths[:, None]) if left_pad else (pos < lengths[:, None])
    mask = mask.to(DTYPE)
    rewards = torch.randn(B, T, generator=g, dtype=DTYPE)
    values = torch.randn(B, T, generator=g, dtype=DTYPE)
    logps = -torch.rand(B, T, generator=g, dtype=DTYPE) * 3
    old = logps + torch.randn(B, T, generator=g, dtype=DTYPE) * 0.3
    ref = logps + torch.randn(B, T, generator=g, dtype=DTYPE) * 0.3
    scores = torch.randn(B, generator=g, dtype=DTYPE)
    return rewards, values, mask, logps, old, ref, scores


def _close(ours, theirs, what):
    theirs = torch.as_tensor(theirs, dtype=DTYPE)
    assert torch.allclose(ours.to(DTYPE), theirs, atol=1e-6, rtol=0), (
        f"{what}: max |diff| {(ours - theirs).abs().max().item():.3g}")


# ---------------------------------------------------------------------------------------------
# against the loop
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("left_pad", [False, True])
@pytest.mark.parametrize("gamma,lam", [(1.0, 0.95), (0.99, 0.9), (1.0, 1.0), (0.9, 0.0)])
def test_gae_matches_the_loop(seed, left_pad, gamma, lam):
    rewards, values, mask, *_ = _batch(seed, left_pad=left_pad)
    adv, ret = gae(rewards, values, mask, gamma=gamma, lam=lam)
    adv_l, ret_l = loop_gae(rewards.tolist(), values.tolist(), mask.tolist(), gamma, lam)
    _close(adv, adv_l, "advantages")
    _close(ret, ret_l, "returns")


def test_gae_with_holes_matches_the_loop():
    """A mask with holes (e.g. tool output inside a multi-turn completion): the scan skips them."""
    rewards, values, _, *_ = _batch(9, B=3, T=8)
    mask = torch.tensor([[1, 1, 0, 0, 1, 1, 0, 0], [1, 0, 1, 0, 1, 0, 1, 0], [0, 0, 1, 1, 1, 1, 1, 1]], dtype=DTYPE)
    adv, ret = gae(rewards, values, mask, gamma=0.97, lam=0.9)
    adv_l, ret_l = loop_gae(rewards.tolist(), values.tolist(), mask.tolist(), 0.97, 0.9)
    _close(adv, adv_l, "advantages with holes")
    _close(ret, ret_l, "returns with holes")


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
@pytest.mark.parametrize("left_pad", [False, True])
def test_kl_shaped_rewards_match_the_loop(estimator, left_pad):
    _, _, mask, logps, old, ref, scores = _batch(3, left_pad=left_pad)
    ours = kl_shaped_rewards(scores, old, ref, mask, kl_coef=0.05, estimator=estimator)
    theirs = loop_kl_shaped(scores.tolist(), old.tolist(), ref.tolist(), mask.tolist(), 0.05, estimator)
    _close(ours, theirs, f"kl-shaped rewards {estimator}")


@pytest.mark.parametrize("seed", range(3))
def test_value_loss_matches_the_loop_value_and_gradient(seed):
    _, values, mask, *_ = _batch(seed)
    g = torch.Generator().manual_seed(100 + seed)
    old_values = values + torch.randn(values.shape, generator=g, dtype=DTYPE) * 0.4
    returns = values + torch.randn(values.shape, generator=g, dtype=DTYPE)
    v = values.clone().requires_grad_(True)
    loss = ppo_value_loss(v, old_values, returns, mask, clip_range_value=0.2)
    loss.backward()
    _close(loss, loop_value_loss(values.tolist(), old_values.tolist(), returns.tolist(), mask.tolist(), 0.2),
           "value loss")
    # the gradient by central differences of the loop (the loss is piecewise quadratic)
    h = 1e-6
    num = torch.zeros_like(values)
    for i, t in mask.nonzero().tolist():
        up, down = values.clone(), values.clone()
        up[i, t] += h
        down[i, t] -= h
        num[i, t] = (loop_value_loss(up.tolist(), old_values.tolist(), returns.tolist(), mask.tolist(), 0.2)
                     - loop_value_loss(down.tolist(), old_values.tolist(), returns.tolist(), mask.tolist(), 0.2)) / (2 * h)
    _close(v.grad, num, "value loss gradient")


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("per_token", [False, True])
def test_policy_loss_matches_the_loop_and_grpo_loss(seed, per_token):
    rewards, _, mask, logps, old, _, _ = _batch(seed)
    B, T = logps.shape
    adv = rewards if per_token else rewards[:, 0]
    adv_rows = adv.tolist() if per_token else [[a] * T for a in adv.tolist()]
    lp = logps.clone().requires_grad_(True)
    loss = ppo_policy_loss(lp, old, adv, mask, clip_range=0.2)
    loss.backward()
    _close(loss, loop_policy_loss(logps.tolist(), old.tolist(), adv_rows, mask.tolist(), 0.2), "policy loss")
    # the same clipped surrogate as grpo_loss with its token-sum-over-token-count ("bnpo") aggregation
    lp2 = logps.clone().requires_grad_(True)
    grpo = grpo_loss(lp2, old, None, adv, mask, loss_type="bnpo", epsilon=0.2)
    grpo.backward()
    _close(loss, grpo, "policy loss vs grpo_loss bnpo")
    _close(lp.grad, lp2.grad, "policy gradient vs grpo_loss bnpo")


# ---------------------------------------------------------------------------------------------
# hand-worked figures
# ---------------------------------------------------------------------------------------------


def test_gae_hand_worked():
    # one sequence of 3 real tokens + 1 pad; reward 1 at the end; V = [0.5, 0.5, 0.5]; gamma 1, lam 0.5
    # delta_2 = 1 + 0 - 0.5 = 0.5; delta_1 = 0 + 0.5 - 0.5 = 0; delta_0 = 0
    # A_2 = 0.5; A_1 = 0 + 0.5 * 0.5 = 0.25; A_0 = 0 + 0.5 * 0.25 = 0.125
    rewards = torch.tensor([[0.0, 0.0, 1.0, 9.0]])
    values = torch.tensor([[0.5, 0.5, 0.5, 9.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    adv, ret = gae(rewards, values, mask, gamma=1.0, lam=0.5)
    assert torch.allclose(adv, torch.tensor([[0.125, 0.25, 0.5, 0.0]]))
    assert torch.allclose(ret, torch.tensor([[0.625, 0.75, 1.0, 0.0]]))


def test_kl_shaped_rewards_hand_worked_score_never_on_padding():
    # log r = ref - old = [-0.1, 0.2, 0.0]; k1 = -log r = [0.1, -0.2, 0]; kl_coef 0.5 -> -0.5 * k1
    old = torch.tensor([[-1.0, -2.0, -3.0], [-1.0, -2.0, -3.0]])
    ref = torch.tensor([[-1.1, -1.8, -3.0], [-1.1, -1.8, -3.0]])
    mask = torch.tensor([[1, 1, 0], [0, 1, 1]])  # right-padded, then left-padded
    out = kl_shaped_rewards(torch.tensor([2.0, 3.0]), old, ref, mask, kl_coef=0.5)
    assert torch.allclose(out, torch.tensor([[-0.05, 0.1 + 2.0, 0.0], [0.0, 0.1, 0.0 + 3.0]]), atol=1e-6)


def test_value_loss_hand_worked():
    # V_old = 0, V = 0.5, R = 1, c = 0.2: unclipped (0.5-1)^2 = 0.25, clipped (0.2-1)^2 = 0.64 -> 0.5*0.64
    # V_old = 0, V = 0.5, R = 0: unclipped 0.25, clipped 0.04 -> 0.5 * 0.25; mean = (0.32 + 0.125) / 2
    loss = ppo_value_loss(torch.tensor([[0.5, 0.5, 7.0]]), torch.zeros(1, 3), torch.tensor([[1.0, 0.0, 0.0]]),
                          torch.tensor([[1, 1, 0]]), clip_range_value=0.2)
    assert loss.item() == pytest.approx((0.32 + 0.125) / 2)


def test_policy_loss_and_clipfrac_hand_worked():
    # ratios e^{0.5} = 1.65 with A = +1 (clipped: -1.2), e^{-0.5} = 0.61 with A = +1 (unclipped: -0.61),
    # e^{-0.5} with A = -1 (clipped: +0.8), 1.0 with A = -1 (-(-1) = 1)
    logps = torch.tensor([[0.5, -0.5, -0.5, 0.0]])
    old = torch.zeros(1, 4)
    adv = torch.tensor([[1.0, 1.0, -1.0, -1.0]])
    mask = torch.ones(1, 4)
    loss = ppo_policy_loss(logps, old, adv, mask)
    assert loss.item() == pytest.approx((-1.2 - math.exp(-0.5) + 0.8 + 1.0) / 4, abs=1e-6)
    metrics = ppo_policy_metrics(logps, old, adv, mask)
    assert metrics["policy/clipfrac_avg"] == pytest.approx(0.5)
    assert metrics["policy/approxkl_avg"] == pytest.approx(0.5 * (0.25 * 3) / 4)


# ---------------------------------------------------------------------------------------------
# properties
# ---------------------------------------------------------------------------------------------

rows = st.integers(min_value=1, max_value=4)
cols = st.integers(min_value=1, max_value=8)


@settings(max_examples=60, deadline=None)
@given(B=rows, T=cols, seed=st.integers(0, 10_000), gamma=st.floats(0.5, 1.0), lam=st.floats(0.0, 1.0),
       left_pad=st.booleans())
def test_gae_properties(B, T, seed, gamma, lam, left_pad):
    rewards, values, mask, *_ = _batch(seed, B, T, left_pad)
    adv, ret = gae(rewards, values, mask, gamma=gamma, lam=lam)
    real = mask > 0
    # masked positions are 0, and changing rewards/values there changes nothing
    assert torch.all(adv[~real] == 0) and torch.all(ret[~real] == 0)
    noise = torch.randn(B, T, dtype=DTYPE, generator=torch.Generator().manual_seed(seed + 1)) * (~real)
    adv2, ret2 = gae(rewards + noise, values - noise, mask, gamma=gamma, lam=lam)
    assert torch.equal(adv, adv2) and torch.equal(ret, ret2)
    # returns = advantages + values on real tokens
    assert torch.allclose(ret[real], (adv + values)[real], atol=1e-12)
    # gamma = lam = 1: returns are the reward-to-go, advantages = reward-to-go - values
    adv1, ret1 = gae(rewards, values, mask, gamma=1.0, lam=1.0)
    to_go = (rewards * mask).flip(1).cumsum(1).flip(1)
    assert torch.allclose(ret1[real], to_go[real], atol=1e-9)
    assert torch.allclose(adv1[real], (to_go - values)[real], atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(B=rows, T=cols, seed=st.integers(0, 10_000), left_pad=st.booleans(), kl_coef=st.floats(0.0, 1.0))
def test_kl_shaped_rewards_properties(B, T, seed, left_pad, kl_coef):
    _, _, mask, _, old, ref, scores = _batch(seed, B, T, left_pad)
    out = kl_shaped_rewards(scores, old, ref, mask, kl_coef=kl_coef)
    real = mask > 0
    assert torch.all(out[~real] == 0), "nothing may land on padding"
    # the rewards of a row sum to its score minus kl_coef * the summed KL
    kl = ((old - ref) * mask).sum(1)
    assert torch.allclose(out.sum(1), scores - kl_coef * kl, atol=1e-9)
    # with kl_coef 0 the only non-zero is the score, at the last real token
    only = kl_shaped_rewards(scores, old, ref, mask, kl_coef=0.0)
    last = torch.where(real, torch.arange(T).expand(B, T), -1).max(1).values
    assert torch.equal(only.gather(1, last[:, None]).squeeze(1), scores)


@settings(max_examples=40, deadline=None)
@given(B=rows, T=cols, seed=st.integers(0, 10_000))
def test_value_loss_properties(B, T, seed):
    _, values, mask, *_ = _batch(seed, B, T)
    g = torch.Generator().manual_seed(seed)
    returns = torch.randn(B, T, generator=g, dtype=DTYPE)
    # old == current: the clip is inactive and the loss is half the masked MSE
    mse = 0.5 * (((values - returns) ** 2) * mask).sum() / mask.sum()
    assert torch.allclose(ppo_value_loss(values, values, returns, mask), mse)
    # the max never lets the clipped loss be below the unclipped one
    old = values + torch.randn(B, T, generator=g, dtype=DTYPE)
    assert ppo_value_loss(values, old, returns, mask) >= mse - 1e-12


def test_errors_name_the_argument():
    x = torch.zeros(2, 3)
    m = torch.ones(2, 3)
    with pytest.raises(ValueError, match="mask"):
        kl_shaped_rewards(torch.zeros(2), x, x, torch.tensor([[1, 1, 0], [0, 0, 0]]), kl_coef=0.1)
    with pytest.raises(ValueError, match="scores"):
        kl_shaped_rewards(torch.zeros(3), x, x, m, kl_coef=0.1)
    with pytest.raises(ValueError, match="estimator"):
        kl_shaped_rewards(torch.zeros(2), x, x, m, kl_coef=0.1, estimator="k4")
    with pytest.raises(ValueError, match="lam"):
        gae(x, x, m, lam=1.5)
    with pytest.raises(ValueError, match="values"):
        gae(x, torch.zeros(2, 4), m)
    with pytest.raises(ValueError, match="advantages"):
        ppo_policy_loss(x, x, torch.zeros(3), m)
    with pytest.raises(ValueError, match="clip_range_value"):
        ppo_value_loss(x, x, x, m, clip_range_value=-1)
