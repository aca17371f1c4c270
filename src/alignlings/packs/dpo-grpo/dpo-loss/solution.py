"""DPO loss at the sequence level: TRL DPOTrainer's default "sigmoid" loss."""
import torch
import torch.nn.functional as F


def dpo_loss(policy_chosen_logp, policy_rejected_logp, ref_chosen_logp, ref_rejected_logp, beta=0.1):
    # each argument is a [batch] tensor of log-probs summed over the completion tokens
    chosen_implicit_r = policy_chosen_logp - ref_chosen_logp  # BLANK
    rejected_implicit_r = policy_rejected_logp - ref_rejected_logp  # BLANK
    margin = beta * (chosen_implicit_r - rejected_implicit_r)  # BLANK
    # logsigmoid stays finite where log(sigmoid(x)) underflows to -inf
    loss = -F.logsigmoid(margin).mean()  # BLANK
    return loss


if __name__ == "__main__":
    policy_chosen = torch.tensor([-23.41, -9.85, -17.62, -12.07])
    policy_rejected = torch.tensor([-25.30, -8.71, -16.94, -13.85])
    ref_chosen = torch.tensor([-22.96, -10.12, -17.40, -12.45])
    ref_rejected = torch.tensor([-23.88, -9.04, -16.71, -12.30])
    loss = dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1)
    print(f"DPO loss: {loss.item():.6f}")
    print(f"log 2 (policy == reference): {torch.log(torch.tensor(2.0)).item():.6f}")
