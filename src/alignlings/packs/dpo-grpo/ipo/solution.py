"""IPO (Azar et al., 2023, "A General Theoretical Paradigm to Understand Learning from Human
Preferences", Eq. 17): regress the preference margin onto a finite target instead of pushing it
through a sigmoid. TRL 1.16's DPOTrainer (loss_type="ipo", dpo_trainer.py) divides each summed
log-ratio by its completion's token count first (huggingface/trl PR #1265), so beta means the same for
short and long answers.

All inputs are [B]: log-probs summed over the completion tokens, and the completions' token counts.
"""
import torch
import torch.nn.functional as F


def ipo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps,
             chosen_lengths, rejected_lengths, beta=0.1):
    """(h - 1/(2 beta))^2 averaged over pairs, h the difference of length-averaged log-ratios."""
    # an empty completion (0 tokens) must not divide by zero: TRL clamps the count to 1
    chosen_avg = (policy_chosen_logps - ref_chosen_logps) / chosen_lengths.clamp(min=1)  # BLANK
    rejected_avg = (policy_rejected_logps - ref_rejected_logps) / rejected_lengths.clamp(min=1)  # BLANK
    h = chosen_avg - rejected_avg  # [B]
    target = 1 / (2 * beta)  # BLANK
    return ((h - target) ** 2).mean()  # BLANK


def dpo_sigmoid_loss(h, beta=0.1):
    """DPO's loss on the same margin h, for comparison: -log sigma(beta * h), averaged."""
    return -F.logsigmoid(beta * h).mean()


if __name__ == "__main__":
    # two pairs: a short chosen answer (4 tokens) and a long one (40 tokens) with the same per-token gain
    policy_chosen = torch.tensor([-6.0, -60.0])
    policy_rejected = torch.tensor([-9.0, -90.0])
    ref_chosen = torch.tensor([-8.0, -80.0])
    ref_rejected = torch.tensor([-8.0, -80.0])
    chosen_len = torch.tensor([4, 40])
    rejected_len = torch.tensor([4, 40])
    print(f"IPO loss (beta 0.1): {ipo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, chosen_len, rejected_len).item():.4f}")
    # the margin that minimises each loss: IPO stops at 1/(2 beta) = 5, DPO never stops
    for h in (0.0, 5.0, 20.0, 100.0):
        x = torch.tensor([h], requires_grad=True)
        g_ipo = torch.autograd.grad(ipo_loss(x, torch.zeros(1), torch.zeros(1), torch.zeros(1),
                                             torch.ones(1), torch.ones(1)), x)[0].item()
        g_dpo = torch.autograd.grad(dpo_sigmoid_loss(x), x)[0].item()
        print(f"h = {h:6.1f}   d IPO / dh = {g_ipo:8.3f}   d DPO / dh = {g_dpo:8.5f}")
