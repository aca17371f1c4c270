"""Generalised advantage estimation over the tokens of a completion, by a reverse scan.

Schulman et al., "High-Dimensional Continuous Control Using Generalized Advantage Estimation" (2016),
eq. 16; as in TRL's PPOTrainer before 1.0 (gamma 1, lam 0.95) and alignlings.gae.
"""
import torch


def gae(rewards, values, mask, gamma=1.0, lam=0.95):
    # rewards, values: [B, T] per token; mask: [B, T] 1.0 on real tokens (left or right padding)
    T = rewards.shape[1]
    # padding holds garbage: it must neither be rewarded nor bootstrapped from
    values = values * mask  # BLANK
    rewards = rewards * mask
    last_gae = torch.zeros_like(rewards[:, 0])
    advantages_reversed = []
    for t in reversed(range(T)):
        # the episode ends with the completion: nothing to bootstrap from after the last position
        next_value = values[:, t + 1] if t + 1 < T else torch.zeros_like(values[:, 0])
        delta = rewards[:, t] + gamma * next_value - values[:, t]  # BLANK
        last_gae = delta + gamma * lam * last_gae  # BLANK
        advantages_reversed.append(last_gae)
    advantages = torch.stack(advantages_reversed[::-1], dim=1) * mask  # BLANK
    returns = advantages + values  # BLANK
    return advantages, returns


if __name__ == "__main__":
    # two completions, right-padded; the score 1.0 sits on the last real token
    rewards = torch.tensor([[0.0, 0.0, 1.0, 0.0], [-0.1, 0.5, 0.0, 0.0]])
    values = torch.tensor([[0.5, 0.5, 0.5, 9.0], [0.2, 0.3, 9.0, 9.0]])  # 9.0: garbage on padding
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    for gamma, lam in ((1.0, 0.95), (1.0, 0.5), (1.0, 1.0)):
        advantages, returns = gae(rewards, values, mask, gamma, lam)
        print(f"gamma={gamma}, lam={lam}")
        print(f"  advantages: {[[round(a, 4) for a in row] for row in advantages.tolist()]}")
        print(f"  returns:    {[[round(r, 4) for r in row] for row in returns.tolist()]}")
