"""DPO and IPO losses from per-token log-probs (the DPOTrainer layout: `loss_type="sigmoid"` or "ipo").

Both compare how much the policy moved, relative to the reference, on the chosen and on the rejected
completion. DPO (Rafailov et al., 2023) uses sequence log-probs, the sum over completion tokens. IPO
(Azar et al., 2023, Eq. 17) regresses the margin h onto 1 / (2 beta); TRL, after checking with the
IPO authors, computes h from log-probs averaged over each completion's tokens, so that beta does not
depend on the completion length.
"""

import torch
import torch.nn.functional as F


def sequence_logps(per_token_logps: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sum of the completion tokens' log-probs: [b, T] -> [b]."""
    return (per_token_logps * mask).sum(-1)


def preference_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor, ref_chosen: torch.Tensor,
                    ref_rejected: torch.Tensor, chosen_mask: torch.Tensor, rejected_mask: torch.Tensor,
                    beta: float = 0.1, loss_type: str = "sigmoid") -> torch.Tensor:
    """Per-token log-probs [b, T] of policy and reference on chosen and rejected, completion masks [b, T]
    -> the mean loss over the batch."""
    if beta <= 0:
        raise ValueError(f"beta: expected > 0, got {beta}")
    chosen_logratios = sequence_logps(policy_chosen, chosen_mask) - sequence_logps(ref_chosen, chosen_mask)
    rejected_logratios = sequence_logps(policy_rejected, rejected_mask) - sequence_logps(ref_rejected, rejected_mask)
    if loss_type == "sigmoid":
        losses = -F.logsigmoid(beta * (chosen_logratios - rejected_logratios))
    elif loss_type == "ipo":
        h = chosen_logratios - rejected_logratios
        losses = (h - 1 / (2 * beta)) ** 2
    else:
        raise ValueError(f"loss_type: expected 'sigmoid' or 'ipo', got {loss_type!r}")
    return losses.mean()


if __name__ == "__main__":
    for T in (4, 40):
        # the same preference per token: the policy gained 0.05 nats per chosen token, lost 0.05 per rejected
        ref = torch.full((1, T), -2.0)
        mask = torch.ones(1, T)
        loss = preference_loss(ref + 0.05, ref - 0.05, ref, ref, mask, mask, beta=0.1, loss_type="ipo")
        print(f"IPO loss, {T:2d}-token completions: {loss.item():.3f}")
