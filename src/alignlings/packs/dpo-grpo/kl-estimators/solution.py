"""Schulman's three per-token estimators of KL(pi_theta || pi_ref), and k3 on samples from pi_old.

Schulman, "Approximating KL Divergence" (2020); the ratio-weighted k3 is TRL 1.16 GRPOTrainer's
use_bias_correction_kl (DeepSeek-V3.2, 2025).
"""
import torch


def kl_estimators(logp, ref_logp):
    # logp, ref_logp: [B, T] log-probs of tokens sampled from pi_theta, under pi_theta and pi_ref
    log_ratio = ref_logp - logp  # BLANK
    k1 = -log_ratio  # BLANK
    k2 = 0.5 * log_ratio**2  # BLANK
    # never negative: r - 1 >= log r for every r > 0
    k3 = torch.exp(log_ratio) - 1 - log_ratio  # BLANK
    return k1, k2, k3


def k3_from_old_samples(logp, old_logp, ref_logp):
    # the tokens were sampled from pi_old, not pi_theta: reweight by the importance ratio
    ratio = torch.exp(logp - old_logp)  # BLANK
    _, _, k3 = kl_estimators(logp, ref_logp)
    return ratio * k3  # BLANK


if __name__ == "__main__":
    # a 5-token vocabulary: enumerate it, so expectations are exact sums
    theta = torch.tensor([1.0, 0.5, 0.0, -0.5, -1.0], requires_grad=True)
    ref_logp = torch.log_softmax(torch.tensor([0.2, 0.4, 0.0, -0.1, -0.6]), dim=-1)
    logp = torch.log_softmax(theta, dim=-1)
    p = logp.exp().detach()  # the sampling distribution pi_theta, not differentiated
    true_kl = (logp.exp() * (logp - ref_logp)).sum()
    k1, k2, k3 = kl_estimators(logp, ref_logp)
    print(f"KL(pi || ref) = {true_kl.item():.6f}")
    for name, k in (("k1", k1), ("k2", k2), ("k3", k3)):
        print(f"E[{name}] = {(p * k).sum().item():.6f}   min per token = {k.min().item():+.4f}")
    # which KL does the gradient of E[k] follow?
    reverse = torch.autograd.grad(true_kl, theta, retain_graph=True)[0]
    forward = torch.autograd.grad((ref_logp.exp() * (ref_logp - logp)).sum(), theta, retain_graph=True)[0]
    for name, k in (("k1", k1), ("k2", k2), ("k3", k3)):
        grad = torch.autograd.grad((p * k).sum(), theta, retain_graph=True)[0]
        print(f"grad E[{name}] = {[round(g, 4) for g in grad.tolist()]}")
    print(f"grad KL(pi || ref) = {[round(g, 4) for g in reverse.tolist()]}")
    print(f"grad KL(ref || pi) = {[round(g, 4) for g in forward.tolist()]}")
    # samples from an older policy: the ratio-weighted k3 keeps both the value and the gradient of KL(pi || ref)
    old_logp = torch.log_softmax(torch.tensor([0.6, 0.6, 0.1, -0.3, -0.8]), dim=-1)
    weighted = (old_logp.exp() * k3_from_old_samples(logp, old_logp, ref_logp)).sum()
    grad = torch.autograd.grad(weighted, theta)[0]
    print(f"E_old[ratio * k3] = {weighted.item():.6f}, its gradient = {[round(g, 4) for g in grad.tolist()]}")
