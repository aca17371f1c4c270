"""ORPO (Hong, Lee and Thorne, 2024, "ORPO: Monolithic Preference Optimization without Reference
Model", Eqs. 4-7): one loss that is supervised fine-tuning on the chosen answer plus a penalty when
the policy's odds of the rejected answer approach those of the chosen one. No reference model.
TRL 1.16: trl.experimental.orpo.ORPOTrainer (odds_ratio_loss, get_batch_loss_metrics).

Shapes: B pairs; per-token log-probs [B, T] with a 0/1 completion mask [B, T].
"""
import math

import torch
import torch.nn.functional as F

LOG_HALF = -math.log(2.0)


def average_logps(per_token_logps, mask):
    """[B] mean log-prob over each completion's own tokens: ORPO's log P(y|x) (count at least 1)."""
    return (per_token_logps * mask).sum(-1) / mask.sum(-1).clamp(min=1)  # BLANK


def log1mexp(x):
    """log(1 - exp(x)) for x <= 0, accurate on both sides of -log 2 (TRL's log1mexp).

    Near 0, 1 - exp(x) cancels to 0, so -expm1(x) is used; far below, log1p(-exp(x)) keeps the digits.
    """
    far = x < LOG_HALF
    # each formula only sees inputs on its own side: torch.where back-propagates through both branches,
    # and a -inf in the unused one would turn the gradient into NaN (0 * inf)
    x_far = torch.where(far, x, torch.full_like(x, 2 * LOG_HALF))
    x_near = torch.where(far, torch.full_like(x, LOG_HALF), x)
    return torch.where(far, torch.log1p(-torch.exp(x_far)), torch.log(-torch.expm1(x_near)))


def log_odds(avg_logps):
    """[B] log odds(y|x) = log(P / (1 - P)) with P = exp(avg_logps), computed in log space."""
    return avg_logps - log1mexp(avg_logps)  # BLANK


def orpo_loss(chosen_token_logps, chosen_mask, rejected_token_logps, rejected_mask, nll_loss, beta=0.1):
    """L_SFT + beta * L_OR with L_OR = -log sigma(log odds(y_w|x) - log odds(y_l|x)), averaged over pairs.

    nll_loss: the SFT term, a scalar cross-entropy of the chosen sequences (computed by the caller).
    """
    chosen = average_logps(chosen_token_logps, chosen_mask)  # [B]
    rejected = average_logps(rejected_token_logps, rejected_mask)  # [B]
    log_odds_ratio = log_odds(chosen) - log_odds(rejected)  # BLANK
    ratio = F.logsigmoid(log_odds_ratio)  # BLANK
    return nll_loss - beta * ratio.mean()  # BLANK


if __name__ == "__main__":
    chosen = torch.tensor([[-0.3, -0.5, -0.1, 0.0], [-0.9, -0.7, 0.0, 0.0]])
    chosen_mask = torch.tensor([[1.0, 1, 1, 0], [1, 1, 0, 0]])
    rejected = torch.tensor([[-1.2, -0.8, -1.0, -1.4], [-0.6, -0.9, -0.6, 0.0]])
    rejected_mask = torch.tensor([[1.0, 1, 1, 1], [1, 1, 1, 0]])
    print("log odds, chosen:", log_odds(average_logps(chosen, chosen_mask)).tolist(),
          "rejected:", log_odds(average_logps(rejected, rejected_mask)).tolist())
    print(f"ORPO loss (nll 0.45, beta 0.1): {orpo_loss(chosen, chosen_mask, rejected, rejected_mask, 0.45).item():.4f}")
    # P(y|x) close to 1: 1 - exp(x) rounds to 0 in float32, log1mexp does not
    x = torch.tensor([-1e-8])
    print(f"log odds at log P = -1e-8: naive {(x - torch.log(1 - torch.exp(x))).item()}, stable {log_odds(x).item():.4f}")
