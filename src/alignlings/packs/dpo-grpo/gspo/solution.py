"""GSPO (Zheng et al., 2025, "Group Sequence Policy Optimization", arXiv 2507.18071): one importance ratio per
completion instead of one per token.

GRPO weights token t of completion i by pi_theta(y_t) / pi_old(y_t), a weight estimated from a single sample,
whose noise accumulates over long completions (GSPO §3). The reward belongs to the whole completion, so GSPO
weighs the whole completion, with its likelihood ratio normalised by the length:

    s_i = (pi_theta(y_i | x) / pi_old(y_i | x)) ** (1 / |y_i|) = exp((1 / |y_i|) * sum_t log(pi_theta(y_t) / pi_old(y_t)))

the geometric mean of the token ratios. The clip acts on s_i, so a completion is clipped as a whole; the paper's
clip ranges are 3e-4 (left) and 4e-4 (right). TRL 1.16: GRPOConfig(importance_sampling_level="sequence",
loss_type="grpo", epsilon=3e-4, epsilon_high=4e-4, beta=0.0) computes the same loss (grpo_trainer.py, _compute_loss).

Shapes: B completions, T the padded length; mask [B, T] is 1 on completion tokens, 0 on padding.
"""
import torch


def _check_mask(mask):
    empty = (mask.sum(-1) == 0).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"mask: every completion needs at least one token for a sequence ratio; rows {empty} are empty")


def sequence_log_ratio(logps, old_logps, mask):
    """[B]: log s_i, the mean of log pi_theta - log pi_old over each completion's own tokens."""
    _check_mask(mask)
    log_ratio = logps - old_logps  # [B, T]
    return (log_ratio * mask).sum(-1) / mask.sum(-1)  # BLANK


def gspo_loss(logps, old_logps, advantages, mask, epsilon=3e-4, epsilon_high=4e-4):
    """GSPO's objective (Eq. 5), negated: -(1/B) sum_i min(s_i A_i, clip(s_i, 1 - eps_low, 1 + eps_high) A_i).

    logps, old_logps: [B, T] log-probs of the sampled tokens under pi_theta and pi_old; advantages: [B].
    """
    ratio = torch.exp(sequence_log_ratio(logps, old_logps, mask)).unsqueeze(-1)  # BLANK
    ratio_clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon_high)  # BLANK
    advantages = advantages.unsqueeze(-1)  # [B, 1]
    per_sequence_loss = -torch.min(ratio * advantages, ratio_clipped * advantages)  # [B, 1]
    return per_sequence_loss.mean()  # BLANK


def gspo_token_ratio(logps, old_logps, mask):
    """[B, T]: GSPO-token's s_{i,t} = sg[s_i] * pi_theta(y_t) / sg[pi_theta(y_t)] (§4.3, sg = stop-gradient):
    the value of s_i at every token, with the gradient of that token's own log-prob."""
    seq_ratio = torch.exp(sequence_log_ratio(logps, old_logps, mask)).unsqueeze(-1)  # [B, 1]
    return seq_ratio.detach() * torch.exp(logps - logps.detach())  # BLANK


def gspo_token_loss(logps, old_logps, advantages, mask, epsilon=3e-4, epsilon_high=4e-4):
    """GSPO-token (§4.3) with per-token advantages [B, T]: (1/B) sum_i (1/|y_i|) sum_t of the clipped surrogate."""
    ratio = gspo_token_ratio(logps, old_logps, mask)  # [B, T]
    ratio_clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon_high)
    per_token_loss = -torch.min(ratio * advantages, ratio_clipped * advantages)
    return ((per_token_loss * mask).sum(-1) / mask.sum(-1)).mean()


if __name__ == "__main__":
    # two completions of 3 and 5 tokens; token ratios pi_theta / pi_old written out
    token_ratios = torch.tensor([[1.2, 0.9, 1.0, 1.0, 1.0], [1.0005, 1.0, 0.9999, 1.0002, 1.0001]])
    mask = torch.tensor([[1.0, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    old = torch.full((2, 5), -1.5)
    logps = (old + torch.log(token_ratios)).requires_grad_()
    advantages = torch.tensor([1.0, -1.0])
    s = torch.exp(sequence_log_ratio(logps, old, mask))
    print("sequence ratios s_i:", [round(x, 6) for x in s.tolist()])
    loss = gspo_loss(logps, old, advantages, mask)
    loss.backward()
    print(f"GSPO loss: {loss.item():.6f}")
    print("gradient per token:\n", logps.grad)
    # 200 tokens, each 1% more likely than under pi_old: the product of the ratios is 7.39, their geometric mean 1.01
    one_percent = torch.full((1, 200), 0.01)
    print(f"product of ratios: {one_percent.sum().exp().item():.2f}, "
          f"s_i: {torch.exp(sequence_log_ratio(one_percent, torch.zeros(1, 200), torch.ones(1, 200))).item():.4f}")
