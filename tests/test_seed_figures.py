"""Layer 1: the exercise pack's test data (spec/exercises.md, exercises 2-4), worked out by hand.

Every expected number is computed here in plain Python ``math`` with the arithmetic written out, then
compared with the library. Tolerance 1e-5: the library runs in float32, the hand arithmetic in float64.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import alignlings

TOL = 1e-5


def approx(x):
    return pytest.approx(x, rel=TOL, abs=TOL)


# ---------------------------------------------------------------------- exercise 2: DPO, sigmoid

POLICY_CHOSEN = [-23.41, -9.85, -17.62, -12.07]
POLICY_REJECTED = [-25.30, -8.71, -16.94, -13.85]
REF_CHOSEN = [-22.96, -10.12, -17.40, -12.45]
REF_REJECTED = [-23.88, -9.04, -16.71, -12.30]
BETA = 0.1


def test_exercise2_dpo_loss_by_hand():
    # Delta_c = policy_chosen - ref_chosen, pair by pair
    delta_c = [-23.41 - (-22.96), -9.85 - (-10.12), -17.62 - (-17.40), -12.07 - (-12.45)]
    assert delta_c == [approx(-0.45), approx(0.27), approx(-0.22), approx(0.38)]
    # Delta_r = policy_rejected - ref_rejected
    delta_r = [-25.30 - (-23.88), -8.71 - (-9.04), -16.94 - (-16.71), -13.85 - (-12.30)]
    assert delta_r == [approx(-1.42), approx(0.33), approx(-0.23), approx(-1.55)]
    # margin m = beta * (Delta_c - Delta_r)
    margins = [BETA * (c - r) for c, r in zip(delta_c, delta_r)]
    assert margins == [approx(0.097), approx(-0.006), approx(0.001), approx(0.193)]
    # -log sigma(m) = log(1 + exp(-m)); the batch loss is their mean
    per_pair = [math.log(1 + math.exp(-m)) for m in margins]
    expected = sum(per_pair) / 4
    assert expected == pytest.approx(0.658979, abs=1e-6)

    args = [torch.tensor(v) for v in (POLICY_CHOSEN, POLICY_REJECTED, REF_CHOSEN, REF_REJECTED)]
    loss = alignlings.dpo_loss(*args, beta=BETA)
    assert loss.item() == approx(expected)
    per_pair_lib = alignlings.dpo_loss(*args, beta=BETA, reduction="none")
    assert per_pair_lib.tolist() == [approx(x) for x in per_pair]

    # the logged metrics: rewards = beta * Delta, 3 of 4 margins positive
    metrics = alignlings.dpo_metrics(*args, beta=BETA)
    assert metrics["rewards/chosen"] == approx(BETA * sum(delta_c) / 4)
    assert metrics["rewards/rejected"] == approx(BETA * sum(delta_r) / 4)
    assert metrics["rewards/margins"] == approx(sum(margins) / 4)
    assert metrics["rewards/accuracies"] == 0.75


# --------------------------------------------------------------- exercise 3: GRPO group advantage

EPS = 1e-4


def advantages_by_hand(rewards: list[float]) -> list[float]:
    """(r - mean) / (std + eps) with Bessel's std, written out."""
    G = len(rewards)
    mean = sum(rewards) / G
    var = sum((r - mean) ** 2 for r in rewards) / (G - 1)  # unbiased, as torch.std (numpy's default divides by G)
    std = math.sqrt(var)
    return [(r - mean) / (std + EPS) for r in rewards]


def test_exercise3_continuous_group():
    rewards = [0.83, 0.41, 0.95, 0.27, 0.62, 0.09, 0.51, 0.78]
    mean = (0.83 + 0.41 + 0.95 + 0.27 + 0.62 + 0.09 + 0.51 + 0.78) / 8
    assert mean == pytest.approx(0.5575)
    var = sum((r - mean) ** 2 for r in rewards) / 7
    std = math.sqrt(var)
    assert std == pytest.approx(0.294461, abs=1e-6)
    expected = [(r - mean) / (std + EPS) for r in rewards]
    assert expected == advantages_by_hand(rewards)
    adv = alignlings.grpo_advantages(rewards)
    assert adv.tolist() == [approx(a) for a in expected]
    assert expected == [pytest.approx(a, abs=1e-4)
                        for a in (0.9251, -0.5007, 1.3325, -0.9760, 0.2122, -1.5871, -0.1613, 0.7554)]
    # the best response (0.95) gets the largest advantage, the worst (0.09) the most negative
    assert int(adv.argmax()) == 2 and int(adv.argmin()) == 5


def test_exercise3_flat_group_has_no_signal():
    adv = alignlings.grpo_advantages([0.5] * 8)
    # mean 0.5, every r - mean = 0, std 0: 0 / (0 + 1e-4) = 0
    assert adv.tolist() == [0.0] * 8


def test_exercise3_outlier_group():
    rewards = [0.10, 0.12, 0.85, 0.08, 0.15, 0.11, 0.09, 0.13]
    mean = sum(rewards) / 8
    assert mean == pytest.approx(1.63 / 8)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / 7)
    expected = [(r - mean) / (std + EPS) for r in rewards]
    adv = alignlings.grpo_advantages(rewards)
    assert adv.tolist() == [approx(a) for a in expected]
    # mean 0.20375, std 0.262076: the outlier alone is far above the mean (2.46 std); the seven others sit
    # just below it (-0.47 to -0.21), so each is pushed down only a little
    assert std == pytest.approx(0.262076, abs=1e-6)
    assert adv[2].item() == pytest.approx(2.4649, abs=1e-4)
    assert all(-0.48 < a < -0.20 for i, a in enumerate(adv.tolist()) if i != 2)


def test_exercise3_sparse_pass_fail_g128():
    G = 128
    successes = (7, 53, 91)
    rewards = [1.0 if i in successes else 0.0 for i in range(G)]
    mean = 3 / 128  # = 0.0234375
    # squared deviations: 3 successes at (1 - mean)^2, 125 failures at mean^2; Bessel divides by 127
    var = (3 * (1 - mean) ** 2 + 125 * mean**2) / 127
    std = math.sqrt(var)
    assert std == pytest.approx(0.151883, abs=1e-6)
    success = (1 - mean) / (std + EPS)
    failure = (0 - mean) / (std + EPS)
    assert success == pytest.approx(6.4255, abs=1e-4)  # a rare success: a large push up
    assert failure == pytest.approx(-0.15421, abs=1e-5)  # each failure: a small push down

    adv = alignlings.grpo_advantages(rewards)
    for i in range(G):
        assert adv[i].item() == approx(success if i in successes else failure), i
    assert adv.sum().item() == pytest.approx(0.0, abs=1e-4)  # the pushes balance: 3*6.43 = 125*0.154


# --------------------------------------------------------------------- exercise 4: GRPO token loss


def test_exercise4_grpo_loss_by_hand():
    G, T, V = 4, 8, 50
    input_len, epsilon, beta = 3, 0.2, 0.01
    torch.manual_seed(42)
    logits_cur = torch.randn(G, T, V)
    logits_old = torch.randn(G, T, V)
    logits_ref = torch.randn(G, T, V)
    ids = torch.randint(0, V, (G, T))

    def token_logps(logits):
        return F.log_softmax(logits, dim=-1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)  # [G, T]

    pi, pi_old, pi_ref = token_logps(logits_cur), token_logps(logits_old), token_logps(logits_ref)

    # advantage: exercise 3's function on the group's rewards
    rewards = [0.7, 0.2, 0.4, 0.85]
    adv_hand = advantages_by_hand(rewards)
    adv = alignlings.grpo_advantages(rewards)
    assert adv.tolist() == [approx(a) for a in adv_hand]
    assert adv_hand == [pytest.approx(a, abs=1e-4) for a in (0.5551, -1.1530, -0.4697, 1.0676)]

    # the loss, one response token at a time
    total, count = 0.0, 0
    for g in range(G):
        for t in range(input_len, T):
            lp, lp_old, lp_ref = pi[g, t].item(), pi_old[g, t].item(), pi_ref[g, t].item()
            ratio = math.exp(lp - lp_old)
            ratio_clip = min(max(ratio, 1 - epsilon), 1 + epsilon)
            surrogate = min(ratio * adv_hand[g], ratio_clip * adv_hand[g])
            log_r = lp_ref - lp  # k3 of log q - log p, q = pi_ref, p = pi_theta
            k3 = math.exp(log_r) - log_r - 1
            total += surrogate - beta * k3
            count += 1
    assert count == G * (T - input_len)
    expected = -total / count

    mask = torch.zeros(G, T)
    mask[:, input_len:] = 1.0  # the response tokens
    loss = alignlings.grpo_loss(pi, pi_old, pi_ref, adv, mask, loss_type="bnpo", beta=beta, epsilon=epsilon,
                                use_bias_correction_kl=False)
    assert loss.item() == approx(expected)
    # every response has the same length, so the per-sequence mean (grpo) and dapo agree with bnpo
    for loss_type in ("grpo", "dapo"):
        other = alignlings.grpo_loss(pi, pi_old, pi_ref, adv, mask, loss_type=loss_type, beta=beta,
                                     epsilon=epsilon, use_bias_correction_kl=False)
        assert other.item() == approx(expected), loss_type
