"""PPO for RLHF: per-token rewards (a KL penalty on every token, the score on the last real one) and
the clipped value loss.

Ziegler et al. (2019) and Ouyang et al. (2022) for the reward; TRL's PPOTrainer before 1.0 and Huang et
al., "The N+ Implementation Details of RLHF with PPO" (2024) for both; alignlings.kl_shaped_rewards and
alignlings.ppo_value_loss. TRL's PPOTrainer placed the score one step after EOS and kept
that position unmasked (padding_mask_p1), so it reached the EOS advantage through GAE; issue #3750, open and
disputed, asks whether that is a bug. #2778: a last-token lookup that assumed right padding.
"""
import torch


def kl_shaped_rewards(scores, logps, ref_logps, mask, kl_coef=0.05):
    # scores: [B] reward-model scores; logps, ref_logps: [B, T] log-probs of the sampled tokens under
    # the sampling policy and the reference; mask: [B, T] 1.0 on real tokens (left or right padding)
    kl = logps - ref_logps  # BLANK
    rewards = -kl_coef * kl * mask  # BLANK
    positions = torch.arange(mask.shape[1]).expand_as(mask)
    last = torch.where(mask > 0, positions, -1).max(dim=1).values  # BLANK
    # the score belongs to the last real token, never to padding
    rewards[torch.arange(len(scores)), last] += scores  # BLANK: stmt
    return rewards


def ppo_value_loss(values, old_values, returns, mask, clip_range_value=0.2):
    # values: [B, T] current value predictions (with gradient); old_values: at rollout time;
    # returns: [B, T] GAE targets; mask: [B, T]
    values_clipped = torch.clamp(values, old_values - clip_range_value, old_values + clip_range_value)  # BLANK
    loss_unclipped = (values - returns) ** 2
    loss_clipped = (values_clipped - returns) ** 2  # BLANK
    per_token = 0.5 * torch.max(loss_unclipped, loss_clipped)  # BLANK
    return (per_token * mask).sum() / mask.sum()  # BLANK


if __name__ == "__main__":
    scores = torch.tensor([2.0, 3.0])
    logps = torch.tensor([[-1.0, -2.0, -3.0, -0.5], [-0.5, -1.0, -2.0, -3.0]])
    ref_logps = torch.tensor([[-1.1, -1.8, -3.0, -0.1], [-0.1, -1.1, -1.8, -3.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [0.0, 1.0, 1.0, 1.0]])  # right-padded, then left-padded
    rewards = kl_shaped_rewards(scores, logps, ref_logps, mask, kl_coef=0.5)
    print(f"rewards: {[[round(r, 4) for r in row] for row in rewards.tolist()]}")

    values = torch.tensor([[0.5, 0.5, 0.5, 9.0], [9.0, 0.1, 0.9, 0.0]], requires_grad=True)
    old_values = torch.tensor([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
    returns = torch.tensor([[1.0, 0.0, 0.45, 0.0], [0.0, 0.5, 1.5, 1.0]])
    loss = ppo_value_loss(values, old_values, returns, mask)
    loss.backward()
    print(f"value loss: {loss.item():.6f}")
    print(f"d loss / d values: {[[round(g, 4) for g in row] for row in values.grad.tolist()]}")
