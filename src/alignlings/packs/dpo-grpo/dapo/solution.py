"""DAPO (Yu et al., 2025, "DAPO: An Open-Source LLM Reinforcement Learning System at Scale", arXiv 2503.14476).

Four changes to GRPO for long chain-of-thought RL:
- Clip-Higher (§3.1): the ratio is clipped to [1 - eps_low, 1 + eps_high] with eps_high = 0.28 > eps_low = 0.2,
  so a token the policy finds unlikely can grow further before its gradient stops (against entropy collapse).
- Dynamic Sampling (§3.2, Eq. 11): a group whose G rewards are all equal has advantage 0 everywhere and gives
  no gradient; such groups are dropped (and more prompts sampled until the batch is full).
- Token-level policy gradient loss (§3.3): one mean over all completion tokens (TRL's loss_type="dapo").
- Overlong reward shaping (§3.4, Eq. 13): a soft length penalty over the last L_cache tokens before L_max.

TRL 1.16: GRPOConfig(epsilon=0.2, epsilon_high=0.28, loss_type="dapo") and
trl.rewards.get_soft_overlong_punishment(max_completion_len, soft_punish_cache). TRL logs the fraction of
groups with equal rewards (frac_reward_zero_std) but does not drop them.

Shapes: P prompts, G completions per prompt, B = P * G completions stored group-major (rows p*G .. p*G+G-1
belong to prompt p), T the padded completion length; mask [B, T] is 1 on completion tokens, 0 on padding.
"""
import torch


def overlong_penalty(lengths, max_completion_len, soft_punish_cache):
    """DAPO Eq. 13: 0 up to L_max - L_cache tokens, then falling linearly to -1 at L_max, and -1 beyond."""
    if not 0 <= soft_punish_cache <= max_completion_len:
        raise ValueError(f"soft_punish_cache: expected an int in [0, max_completion_len={max_completion_len}], "
                         f"got {soft_punish_cache!r}")
    lengths = torch.as_tensor(lengths, dtype=torch.float32)
    if soft_punish_cache == 0:  # no soft interval: only completions longer than L_max are punished
        return torch.where(lengths > max_completion_len, -1.0, 0.0)
    # how far the completion reaches into the punishment interval, in units of L_cache, with the sign of a penalty
    ramp = (max_completion_len - soft_punish_cache - lengths) / soft_punish_cache  # BLANK
    return ramp.clamp(min=-1.0, max=0.0)  # BLANK


def dapo_rewards(correct, lengths, max_completion_len, soft_punish_cache):
    """The paper's rule-based reward (Eq. 7), +1 for a correct answer and -1 otherwise, plus the overlong penalty."""
    correct = torch.as_tensor(correct, dtype=torch.bool)
    return torch.where(correct, 1.0, -1.0) + overlong_penalty(lengths, max_completion_len, soft_punish_cache)


def informative_groups(rewards):
    """[P, G] rewards -> [P] bool: True where the group's rewards are not all equal (Eq. 11's constraint)."""
    return rewards.max(dim=-1).values > rewards.min(dim=-1).values  # BLANK


def group_advantages(rewards, eps=1e-4):
    """[P, G] -> [P, G]: rewards z-scored within each group (TRL's eps and unbiased std)."""
    mean = rewards.mean(dim=-1, keepdim=True)
    std = rewards.std(dim=-1, keepdim=True)
    return (rewards - mean) / (std + eps)


def dapo_loss(logps, old_logps, advantages, mask, epsilon_low=0.2, epsilon_high=0.28):
    """The clipped surrogate with decoupled clip ranges, one mean over all completion tokens.

    logps, old_logps: [B, T] log-probs of the sampled tokens under pi_theta and pi_old; advantages: [B].
    """
    ratio = torch.exp(logps - old_logps)  # [B, T]
    advantages = advantages.unsqueeze(1)  # [B, 1]
    ratio_clipped = torch.clamp(ratio, 1 - epsilon_low, 1 + epsilon_high)  # BLANK
    per_token_loss = -torch.min(ratio * advantages, ratio_clipped * advantages)  # [B, T]
    return (per_token_loss * mask).sum() / mask.sum().clamp(min=1.0)  # BLANK


@torch.no_grad()
def clip_fractions(logps, old_logps, advantages, mask, epsilon_low=0.2, epsilon_high=0.28):
    """TRL's clip_ratio/low_mean and clip_ratio/high_mean: the fractions of completion tokens whose gradient
    the lower and the upper clip switch off."""
    ratio = torch.exp(logps - old_logps)  # [B, T]
    advantages = advantages.unsqueeze(1)  # [B, 1]
    low = (ratio < 1 - epsilon_low) & (advantages < 0)
    high = (ratio > 1 + epsilon_high) & (advantages > 0)  # BLANK
    count = mask.sum().clamp(min=1.0)
    return {"low": (low * mask).sum() / count, "high": (high * mask).sum() / count}


def dapo_batch_loss(rewards, logps, old_logps, mask, epsilon_low=0.2, epsilon_high=0.28):
    """Dynamic sampling, then the DAPO loss: drop the groups whose rewards are all equal, z-score the others
    within their group, and average over the tokens of the completions that are kept."""
    P, G = rewards.shape
    if logps.shape[0] != P * G:
        raise ValueError(f"logps: expected {P * G} rows (P={P} prompts x G={G} completions, group-major), "
                         f"got {logps.shape[0]}")
    keep = informative_groups(rewards)  # [P]
    if not bool(keep.any()):
        raise ValueError("rewards: every group's rewards are equal, so no completion has an advantage; "
                         "DAPO samples more prompts before updating")
    advantages = group_advantages(rewards[keep]).reshape(-1)  # [P_kept * G], group-major
    rows = keep.repeat_interleave(G)  # BLANK
    return dapo_loss(logps[rows], old_logps[rows], advantages, mask[rows], epsilon_low, epsilon_high)


if __name__ == "__main__":
    # L_max = 20, L_cache = 4: the penalty starts after 16 tokens
    lengths = torch.tensor([12, 16, 17, 18, 20, 23])
    print("overlong penalty:", overlong_penalty(lengths, 20, 4).tolist())
    print("rewards:         ", dapo_rewards([True, True, True, False, True, False], lengths, 20, 4).tolist())

    # four groups of eight: all right, all wrong, mixed, and all right at the same penalized length
    rewards = torch.tensor([[1.0] * 8, [-1.0] * 8, [1.0, -1, -1, 1, -1, -1, -1, 1], [0.7] * 8])
    print("informative groups:", informative_groups(rewards).tolist())

    # clip-higher: a token with A > 0 whose ratio has grown to 1.25 still gets a gradient, one at 1.3 does not
    old = torch.log(torch.tensor([[0.10, 0.10, 0.50], [0.10, 0.10, 0.50]]))
    new = torch.log(torch.tensor([[0.125, 0.13, 0.50], [0.075, 0.07, 0.50]])).requires_grad_()
    adv, mask = torch.tensor([1.0, -1.0]), torch.ones(2, 3)
    loss = dapo_loss(new, old, adv, mask)
    loss.backward()
    print(f"DAPO loss {loss.item():.4f}; gradient per token:\n{new.grad}")
    print("clip fractions:", {k: round(v.item(), 4) for k, v in clip_fractions(new, old, adv, mask).items()})
