"""KTO (Ethayarajh et al., 2024, "KTO: Model Alignment as Prospect Theoretic Optimization", Eq. 7):
preference learning from single completions labelled desirable or undesirable, not from pairs. Each
example's implicit reward r = log pi_theta(y|x) - log pi_ref(y|x) is compared with a reference point
z_0, the KL divergence of the policy from the reference, estimated on the batch from mismatched
(prompt, other completion) pairs. TRL 1.16: trl.trainer.kto_trainer.KTOTrainer (loss_type="kto").

Shapes: N examples; summed completion log-probs [N]; labels [N] bool (True = desirable).
"""
import torch


def mismatched(completions):
    """TRL's KL completions: the batch's completions rotated by one, so prompt i meets completion i-1."""
    return completions[-1:] + completions[:-1]  # BLANK


def kl_baseline(policy_kl_logps, ref_kl_logps):
    """z_0: the batch estimate of KL(pi_theta || pi_ref) from the mismatched pairs, a scalar."""
    # a reference point, not a target: no gradient flows through it, and a divergence is never negative
    return (policy_kl_logps - ref_kl_logps).mean().detach().clamp(min=0)  # BLANK


def kto_loss(policy_logps, ref_logps, labels, policy_kl_logps, ref_kl_logps, beta=0.1,
             desirable_weight=1.0, undesirable_weight=1.0):
    """Mean over all N examples of lambda_D (1 - v_D) or lambda_U (1 - v_U), by label."""
    kl = kl_baseline(policy_kl_logps, ref_kl_logps)
    logratios = policy_logps - ref_logps  # [N], the implicit reward r
    desirable = 1 - torch.sigmoid(beta * (logratios - kl))  # BLANK
    undesirable = 1 - torch.sigmoid(beta * (kl - logratios))  # BLANK
    losses = torch.where(labels, desirable_weight * desirable, undesirable_weight * undesirable)  # BLANK
    return losses.mean()  # BLANK


def weight_ratio(labels, desirable_weight, undesirable_weight):
    """lambda_D * n_D / (lambda_U * n_U): the paper advises keeping it in [1, 4/3]."""
    n_desirable = int(labels.sum())
    n_undesirable = labels.numel() - n_desirable
    return desirable_weight * n_desirable / (undesirable_weight * n_undesirable)  # BLANK


if __name__ == "__main__":
    print("mismatched:", mismatched(["y1", "y2", "y3", "y4"]))
    labels = torch.tensor([True, True, True, True, False, False])
    policy = torch.tensor([-10.0, -12.0, -8.0, -15.0, -11.0, -9.0])
    ref = torch.tensor([-11.0, -12.5, -9.0, -14.0, -10.0, -9.5])
    policy_kl = torch.tensor([-20.0, -18.0, -25.0, -22.0, -19.0, -21.0])
    ref_kl = torch.tensor([-20.5, -18.2, -25.1, -22.4, -19.0, -21.6])
    print(f"z_0 = {kl_baseline(policy_kl, ref_kl).item():.4f}")
    print(f"KTO loss: {kto_loss(policy, ref, labels, policy_kl, ref_kl).item():.6f}")
    # 4 desirable for 2 undesirable: lambda_U = 2 (or 1.5) puts the ratio into [1, 4/3]
    for w_u in (1.0, 1.5, 2.0):
        print(f"undesirable_weight {w_u}: lambda_D n_D / (lambda_U n_U) = {weight_ratio(labels, 1.0, w_u):.3f}")
