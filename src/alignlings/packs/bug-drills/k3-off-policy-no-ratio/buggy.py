"""GRPO loss with a k3 KL penalty in the loss, for several updates per generation batch.

per_token_logps:      [B, T] log pi_theta of the sampled tokens (requires grad)
old_per_token_logps:  [B, T] log pi_old, the policy that sampled them (constant)
ref_per_token_logps:  [B, T] log pi_ref (constant)
advantages: [B]; mask: [B, T], 1 for completion tokens.

With num_iterations > 1 the tokens were sampled from pi_old, not from pi_theta, so every expectation
over pi_theta is importance-weighted by the per-token ratio pi_theta / pi_old: the clipped surrogate
(PPO) and the KL term alike (DeepSeek-V3.2, TRL's use_bias_correction_kl). The k3 estimator,
exp(ref - logp) - (ref - logp) - 1, is differentiated in the loss. Loss aggregation: mean over each
sequence's tokens, then over sequences (TRL loss_type="grpo").
"""

import torch


def grpo_loss(per_token_logps, old_per_token_logps, ref_per_token_logps, advantages, mask,
              beta: float = 0.04, epsilon: float = 0.2) -> torch.Tensor:
    if not (per_token_logps.shape == old_per_token_logps.shape == ref_per_token_logps.shape == mask.shape):
        raise ValueError(f"per_token_logps, old_per_token_logps, ref_per_token_logps, mask: expected one [B, T] "
                         f"shape, got {[tuple(t.shape) for t in (per_token_logps, old_per_token_logps, ref_per_token_logps, mask)]}")
    if advantages.shape != per_token_logps.shape[:1]:
        raise ValueError(f"advantages: expected shape [B] = {tuple(per_token_logps.shape[:1])}, got {tuple(advantages.shape)}")
    coef_1 = torch.exp(per_token_logps - old_per_token_logps)  # importance ratio pi_theta / pi_old
    coef_2 = torch.clamp(coef_1, 1 - epsilon, 1 + epsilon)
    per_token_loss = -torch.min(coef_1 * advantages[:, None], coef_2 * advantages[:, None])
    if beta != 0.0:
        delta = ref_per_token_logps - per_token_logps
        per_token_kl = torch.exp(delta) - delta - 1  # k3
        per_token_loss = per_token_loss + beta * per_token_kl
    mask = mask.to(per_token_loss.dtype)
    return ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()


if __name__ == "__main__":
    # one token the policy has made unlikely (pi = 0.01) that the reference likes (pi_ref = 0.5)
    logp = torch.tensor([[0.01]]).log().requires_grad_()
    loss = grpo_loss(logp, torch.tensor([[0.02]]).log(), torch.tensor([[0.5]]).log(), torch.zeros(1),
                     torch.ones(1, 1), beta=1.0)
    loss.backward()
    print(loss.item(), logp.grad)
