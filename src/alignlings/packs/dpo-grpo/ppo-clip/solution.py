"""PPO's clipped surrogate policy loss for a language model, per token, with the clip fraction.

Schulman et al., "Proximal Policy Optimization Algorithms" (2017), eq. 7; token-level masked mean as
in TRL's PPOTrainer before 1.0 and CleanRL's ppo.py (Huang et al., "The N+ Implementation Details of
RLHF with PPO", 2024).
"""
import torch


def ppo_clip_loss(logp, old_logp, advantages, mask, clip_range=0.2):
    # logp: [B, T] log-probs of the sampled tokens under pi_theta (with gradient)
    # old_logp: [B, T] the same under pi_old, recorded when the batch was sampled
    # advantages: [B, T] one per token (e.g. from GAE); mask: [B, T] 1.0 on real tokens, 0.0 on padding
    ratio = torch.exp(logp - old_logp)  # BLANK
    # written as losses (to minimise), so the min of the objectives becomes a max of the losses
    pg_losses = -advantages * ratio  # BLANK
    pg_losses_clipped = -advantages * torch.clamp(ratio, 1 - clip_range, 1 + clip_range)  # BLANK
    per_token_loss = torch.max(pg_losses, pg_losses_clipped)  # BLANK
    # average over the real tokens of the whole batch
    loss = (per_token_loss * mask).sum() / mask.sum()  # BLANK
    with torch.no_grad():
        # fraction of real tokens whose clipped loss was the one kept (their gradient is zero)
        clipfrac = ((pg_losses_clipped > pg_losses).float() * mask).sum() / mask.sum()  # BLANK
    return loss, clipfrac


if __name__ == "__main__":
    # one sequence, 5 tokens, the last is padding
    logp = torch.tensor([[-0.5, -1.5, -2.0, -0.7, -3.0]], requires_grad=True)
    old_logp = torch.tensor([[-1.0, -1.0, -2.0, -0.2, -1.0]])
    advantages = torch.tensor([[1.0, 1.0, 0.5, -1.0, 2.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0]])
    loss, clipfrac = ppo_clip_loss(logp, old_logp, advantages, mask)
    loss.backward()
    print(f"ratio: {[round(r, 4) for r in torch.exp(logp - old_logp)[0].tolist()]}")
    print(f"loss: {loss.item():.6f}   clipfrac: {clipfrac.item():.2f}")
    print(f"d loss / d logp: {[round(g, 4) for g in logp.grad[0].tolist()]}")
