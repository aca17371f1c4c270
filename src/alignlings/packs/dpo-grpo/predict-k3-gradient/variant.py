"""Which KL does the gradient of k3 follow, sampled on policy?

A 5-token categorical policy pi = softmax(logits) and a fixed reference. Each estimator k of
``alignlings.losses.kl`` is used as a loss the way a trainer uses it: the tokens are sampled from pi
(here: every token, weighted by its probability, so the expectation is exact) and the weights are
held fixed; only k itself is differentiated. The expected gradient w.r.t. the logits,
sum_x pi(x) * grad k(x), is compared with the gradients of KL(pi || ref) (the reverse KL, whose value k3
estimates) and KL(ref || pi) (the forward KL). TRL 1.16's GRPOTrainer by default multiplies k3 by the
importance ratio pi / pi_old (``use_bias_correction_kl=True``), differentiable though its value is 1 on
policy; that product's expected gradient is computed too.
"""

from __future__ import annotations

import torch

from alignlings.losses.kl import kl_penalty

LOGITS = [1.2, 0.3, -0.4, 0.8, -1.0]  # the policy
REF_LOGITS = [0.2, 0.9, 0.1, -0.5, 0.4]  # the reference


def _expected_grad(estimator: str, ratio_weighted: bool = False) -> torch.Tensor:
    """sum_x pi(x) * d k(x) / d logits, the sampling weights pi(x) held fixed (on-policy samples); with
    ``ratio_weighted`` k is multiplied by pi / pi_old with pi_old = pi detached, as TRL 1.16's default does."""
    logits = torch.tensor(LOGITS, dtype=torch.float64, requires_grad=True)
    ref_logp = torch.log_softmax(torch.tensor(REF_LOGITS, dtype=torch.float64), -1)
    logp = torch.log_softmax(logits, -1)
    weights = logp.exp().detach()  # how often each token is sampled: not differentiated
    k = kl_penalty(logp, ref_logp, estimator)  # one value per token
    if ratio_weighted:
        k = k * torch.exp(logp - logp.detach())  # value 1, gradient grad log pi
    (weights * k).sum().backward()
    return logits.grad


def _kl_grad(pi_first: bool) -> torch.Tensor:
    logits = torch.tensor(LOGITS, dtype=torch.float64, requires_grad=True)
    ref_logp = torch.log_softmax(torch.tensor(REF_LOGITS, dtype=torch.float64), -1)
    logp = torch.log_softmax(logits, -1)
    if pi_first:  # KL(pi || ref) = sum pi (log pi - log ref), the reverse KL
        kl = (logp.exp() * (logp - ref_logp)).sum()
    else:  # KL(ref || pi) = sum ref (log ref - log pi), the forward KL
        kl = (ref_logp.exp() * (ref_logp - logp)).sum()
    kl.backward()
    return logits.grad


def run_k3_gradient() -> dict:
    g1, g2, g3 = (_expected_grad(k) for k in ("k1", "k2", "k3"))
    g3w = _expected_grad("k3", ratio_weighted=True)
    pi_ref, ref_pi = _kl_grad(True), _kl_grad(False)  # grad KL(pi || ref), grad KL(ref || pi)
    return {
        "values": {
            "k3_to_kl_pi_ref": (g3 - pi_ref).norm().item(),
            "k3_to_kl_ref_pi": (g3 - ref_pi).norm().item(),
            "k3_norm": g3.norm().item(),
            "k1_norm": g1.norm().item(),  # k1's expected gradient: zero
            "k2_to_kl_pi_ref": (g2 - pi_ref).norm().item(),
            "kl_pi_ref_to_kl_ref_pi": (pi_ref - ref_pi).norm().item(),
            "k3_ratio_to_kl_pi_ref": (g3w - pi_ref).norm().item(),  # TRL 1.16's default KL term
        },
        "series": {  # one point per logit
            "k3": g3.tolist(),
            "kl_pi_ref": pi_ref.tolist(),
            "kl_ref_pi": ref_pi.tolist(),
        },
    }


def supports_k3_gradient(result: dict) -> int:
    """0: follows KL(pi||ref); 1: follows KL(ref||pi); 2: zero in expectation; 3: both (they coincide)."""
    v = result["values"]
    tol = 1e-6 * max(1.0, v["kl_pi_ref_to_kl_ref_pi"])
    if v["k3_norm"] < tol:
        return 2
    if v["kl_pi_ref_to_kl_ref_pi"] < 1e-6:
        return 3
    if v["k3_to_kl_ref_pi"] < tol and v["k3_to_kl_pi_ref"] > 100 * tol:
        return 1
    if v["k3_to_kl_pi_ref"] < tol:
        return 0
    return -1  # none of the options: the numbers say something the question did not foresee
