"""Evaluating a reward model: pairwise accuracy and margin on held-out pairs (TRL 1.16 RewardTrainer's
metrics), best-of-N selection, its KL from the sampling policy, and what a gold reward says about it.

Stiennon et al. (2020) and Gao et al., "Scaling Laws for Reward Model Overoptimization" (2022) for
best-of-N and KL_bon = log N - (N - 1) / N.
"""
import math

import torch


def reward_accuracy(chosen_rewards, rejected_rewards):
    # [B] rewards of the preferred and the dispreferred answer of each held-out pair
    accuracy = (chosen_rewards > rejected_rewards).float().mean()  # BLANK
    margin = (chosen_rewards - rejected_rewards).mean()  # BLANK
    return accuracy, margin


def best_of_n(rewards, num_generations):
    # rewards: [P * N] reward-model scores, the N samples of each prompt next to each other
    grouped = rewards.view(-1, num_generations)  # BLANK
    # flat index of the highest-scoring sample of each prompt, [P]
    return grouped.argmax(dim=1) + torch.arange(grouped.shape[0]) * num_generations  # BLANK


def best_of_n_kl(n):
    # KL(best-of-n policy || sampling policy) as Stiennon et al. and Gao et al. compute it; Beirami et
    # al. (2024) show it is an upper bound, reached when samples (almost) never tie
    return math.log(n) - (n - 1) / n  # BLANK


def best_of_n_gains(proxy_rewards, gold_rewards, num_generations):
    # select with the proxy reward model, then look at both rewards of the selected samples
    selected = best_of_n(proxy_rewards, num_generations)
    proxy_gain = proxy_rewards[selected].mean() - proxy_rewards.mean()  # BLANK
    gold_gain = gold_rewards[selected].mean() - gold_rewards.mean()  # BLANK
    return proxy_gain, gold_gain


if __name__ == "__main__":
    # a synthetic world: quality q and a "hack" h that the proxy likes and the gold reward dislikes
    g = torch.Generator().manual_seed(0)
    M = 1 << 14
    q = torch.randn(M, generator=g)
    h = (-torch.log(torch.rand(M, generator=g))) ** 2  # heavy-tailed, usually small
    gold, proxy = q - 0.1 * h, q + 0.1 * h
    a, b = torch.randperm(M, generator=g)[:4000].view(2, -1)
    chosen = torch.where(gold[a] > gold[b], a, b)
    rejected = torch.where(gold[a] > gold[b], b, a)
    accuracy, margin = reward_accuracy(proxy[chosen], proxy[rejected])
    print(f"proxy RM on held-out gold pairs: accuracy {accuracy.item():.3f}, margin {margin.item():.3f}")
    for n in (1, 2, 4, 8, 16, 64, 256):
        proxy_gain, gold_gain = best_of_n_gains(proxy, gold, n)
        print(f"N={n:3d}  KL={best_of_n_kl(n):.2f}  proxy gain {proxy_gain.item():+.2f}  gold gain {gold_gain.item():+.2f}")
