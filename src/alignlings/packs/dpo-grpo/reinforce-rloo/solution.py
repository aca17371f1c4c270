"""REINFORCE with RLOO's leave-one-out baseline, as TRL 1.16's RLOOTrainer (on-policy step).

Williams (1992); Kool et al., "Buy 4 REINFORCE Samples, Get a Baseline for Free!" (2019); Ahmadian et
al., "Back to Basics: Revisiting REINFORCE Style Optimization for Learning from Human Feedback" (2024).
"""
import itertools

import torch


def rloo_advantages(rewards, num_generations):
    # rewards: [B], B = P * G; the G completions of each prompt sit next to each other
    grouped = rewards.view(-1, num_generations)  # BLANK
    # leave completion i out of its own baseline
    others_sum = grouped.sum(dim=1, keepdim=True) - grouped  # BLANK
    baseline = others_sum / (num_generations - 1)  # BLANK
    return (grouped - baseline).view(-1)


def reinforce_loss(per_token_logps, mask, advantages):
    # per_token_logps: [B, T] log pi of the sampled tokens (with gradient); mask: [B, T] 1.0 on
    # completion tokens; advantages: [B], constants
    seq_logps = (per_token_logps * mask).sum(dim=1)  # BLANK
    # score-function estimator: its gradient is -mean_i A_i * grad log pi(y_i)
    return -(advantages * seq_logps).mean()  # BLANK


if __name__ == "__main__":
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.9, 0.1, 0.5, 0.5])
    print(f"RLOO advantages (P=2, G=4): {[round(a, 4) for a in rloo_advantages(rewards, 4).tolist()]}")

    # a one-token bandit with 3 answers: enumerate every group of G = 3 samples, so the expected
    # gradient is an exact sum, and compare it with the true gradient of E[r]
    theta = torch.tensor([0.3, -0.2, 0.1], requires_grad=True)
    reward_of = torch.tensor([1.0, 0.0, 0.5])
    logp = torch.log_softmax(theta, dim=0)
    true_grad = torch.autograd.grad(-(logp.exp() * reward_of).sum(), theta, retain_graph=True)[0]
    expected = torch.zeros(3)
    for group in itertools.product(range(3), repeat=3):
        idx = torch.tensor(group)
        prob = logp.detach()[idx].exp().prod()
        loss = reinforce_loss(logp[idx].unsqueeze(1), torch.ones(3, 1), rloo_advantages(reward_of[idx], 3))
        expected += prob * torch.autograd.grad(loss, theta, retain_graph=True)[0]
    print(f"E[grad of the RLOO loss]: {[round(g, 6) for g in expected.tolist()]}")
    print(f"grad of -E[r]:            {[round(g, 6) for g in true_grad.tolist()]}")
