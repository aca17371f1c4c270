"""SimPO (Meng, Xia and Chen, 2024, "SimPO: Simple Preference Optimization with a Reference-Free
Reward", Eq. 6): the reward of a completion is beta times its *average* per-token log-prob under the
policy, with no reference model, and the chosen reward must beat the rejected one by a margin gamma.
TRL 1.16: trl.experimental.cpo.CPOTrainer with loss_type="simpo" (and cpo_alpha=0.0 for pure SimPO).

Shapes: B pairs; per-token log-probs [B, T] with a 0/1 completion mask [B, T] (0 on prompt and padding).
"""
import torch
import torch.nn.functional as F


def average_logps(per_token_logps, mask):
    """[B] mean log-prob over each completion's own tokens (count clamped to at least 1)."""
    return (per_token_logps * mask).sum(-1) / mask.sum(-1).clamp(min=1)  # BLANK


def simpo_loss(chosen_token_logps, chosen_mask, rejected_token_logps, rejected_mask, beta, gamma):
    """-log sigma(beta/|y_w| log pi(y_w|x) - beta/|y_l| log pi(y_l|x) - gamma), averaged over pairs."""
    chosen_rewards = beta * average_logps(chosen_token_logps, chosen_mask)  # BLANK
    rejected_rewards = beta * average_logps(rejected_token_logps, rejected_mask)  # BLANK
    logits = chosen_rewards - rejected_rewards - gamma  # BLANK
    # logsigmoid stays finite where log(sigmoid(x)) underflows to -inf
    return -F.logsigmoid(logits).mean()  # BLANK


if __name__ == "__main__":
    # pair 0: chosen 2 tokens, rejected 4 tokens; pair 1: chosen 4 tokens, rejected 1 token (0 = padding)
    chosen = torch.tensor([[-0.5, -0.7, 0.0, 0.0], [-0.2, -0.4, -0.3, -0.5]])
    chosen_mask = torch.tensor([[1.0, 1, 0, 0], [1, 1, 1, 1]])
    rejected = torch.tensor([[-0.9, -1.1, -0.8, -1.2], [-1.6, 0.0, 0.0, 0.0]])
    rejected_mask = torch.tensor([[1.0, 1, 1, 1], [1, 0, 0, 0]])
    print("average log-probs, chosen:", average_logps(chosen, chosen_mask).tolist(),
          "rejected:", average_logps(rejected, rejected_mask).tolist())
    print(f"SimPO loss (beta 2.0, gamma 0.5): {simpo_loss(chosen, chosen_mask, rejected, rejected_mask, 2.0, 0.5).item():.4f}")
