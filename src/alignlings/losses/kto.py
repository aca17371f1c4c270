"""KTO: Kahneman-Tversky Optimization, on unpaired desirable / undesirable examples, as pure functions.

Ethayarajh et al., "KTO: Model Alignment as Prospect Theoretic Optimization" (2024), Eq. 7. Each
example is one completion with a binary label (desirable or not), not a chosen/rejected pair. Its
implicit reward r = log pi_theta(y|x) - log pi_ref(y|x) is compared with a reference point z_0, the
KL divergence KL(pi_theta || pi_ref), estimated on the batch from *mismatched* pairs (each prompt
with another example's completion), detached and clamped at 0:

    z_0        = max(0, mean_j(log pi_theta(y'_j|x_j) - log pi_ref(y'_j|x_j)))     no gradient
    desirable:   w_D * (1 - sigma(beta * (r - z_0)))
    undesirable: w_U * (1 - sigma(beta * (z_0 - r)))
    loss       = mean over all examples of the weighted terms

The paper's lambda_D, lambda_U are TRL's ``desirable_weight`` / ``undesirable_weight``; it suggests
lambda_D * n_D / (lambda_U * n_U) in [1, 4/3]. ``apo_zero_unpaired`` (D'Oosterlinck et al., 2024)
drops z_0: 1 - sigma(beta * r) for desirable, sigma(beta * r) for undesirable examples.

Equals TRL 1.16's ``KTOTrainer._compute_loss`` (values and gradients).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from alignlings._validate import check_choice, check_floating, check_ndim, check_range, check_same_shape, reduce


def kto_kl_baseline(policy_kl_logps: torch.Tensor, ref_kl_logps: torch.Tensor) -> torch.Tensor:
    """z_0: the batch estimate of KL(pi_theta || pi_ref), a detached scalar clamped at 0.

    ``policy_kl_logps`` / ``ref_kl_logps`` are [B'] summed log-probs of mismatched completions (TRL's
    ``KL_logps`` / ``ref_KL_logps``). It is detached because z_0 is a reference point, not something
    to optimise (the paper: "we do not back-propagate through the KL term"); the clamp keeps the
    Monte-Carlo estimate, which can come out negative, from being a negative divergence.
    """
    return (policy_kl_logps - ref_kl_logps).mean().detach().clamp(min=0)


def kto_desirable_undesirable(logratios: torch.Tensor, kl: torch.Tensor, beta: float
                              ) -> tuple[torch.Tensor, torch.Tensor]:
    """KTO's Eq. 7 value terms, unweighted, for every example: (desirable loss, undesirable loss), each [N]."""
    desirable = 1 - torch.sigmoid(beta * (logratios - kl))
    undesirable = 1 - torch.sigmoid(beta * (kl - logratios))
    return desirable, undesirable


def apo_zero_unpaired_terms(logratios: torch.Tensor, kl: torch.Tensor, beta: float
                            ) -> tuple[torch.Tensor, torch.Tensor]:
    """APO-zero, unpaired: raise desirable, lower undesirable likelihood; no KL reference point."""
    desirable = 1 - torch.sigmoid(beta * logratios)
    undesirable = torch.sigmoid(beta * logratios)
    return desirable, undesirable


#: loss_type -> f(logratios [N], kl scalar, beta) -> (desirable [N], undesirable [N]); TRL 1.16's KTO loss types
KTO_LOSSES: dict[str, Callable[[torch.Tensor, torch.Tensor, float], tuple[torch.Tensor, torch.Tensor]]] = {
    "kto": kto_desirable_undesirable,
    "apo_zero_unpaired": apo_zero_unpaired_terms,
}

#: loss types that need the KL baseline z_0 (TRL's ``calculate_KL``)
KTO_USES_KL = frozenset({"kto"})


def kto_loss(
    policy_logps: torch.Tensor,
    ref_logps: torch.Tensor,
    labels: torch.Tensor,
    policy_kl_logps: torch.Tensor | None = None,
    ref_kl_logps: torch.Tensor | None = None,
    *,
    beta: float = 0.1,
    loss_type: str = "kto",
    desirable_weight: float = 1.0,
    undesirable_weight: float = 1.0,
    reduction: str = "mean",
) -> torch.Tensor:
    """KTO loss on unpaired examples; equals TRL 1.16's KTOTrainer.

    Args:
        policy_logps: [N] summed completion log-probs log pi_theta(y_i|x_i), one per example.
        ref_logps: [N] the same under the frozen reference.
        labels: [N] bool (or 0/1): True for a desirable completion, False for an undesirable one.
        policy_kl_logps: [M] summed log-probs of the mismatched (prompt, other completion) pairs
            under the policy (TRL's ``KL_logps``, computed without gradient); needed by "kto".
        ref_kl_logps: [M] the same under the reference (TRL's ``ref_KL_logps``).
        beta: default 0.1 (TRL's ``KTOConfig.beta``).
        loss_type: "kto" (default) | "apo_zero_unpaired" (no KL term; the KL inputs are ignored).
        desirable_weight: lambda_D, weight of every desirable example's loss (default 1.0).
        undesirable_weight: lambda_U (default 1.0). Raise the rarer side's weight so that
            lambda_D * n_D / (lambda_U * n_U) lies in [1, 4/3] (the paper's advice).
        reduction: "mean" (default; over all N examples, as TRL's ``losses.nanmean()``) | "sum" |
            "none" ([N] weighted losses in the input order; TRL lists desirable ones first).

    Returns:
        The reduced loss.
    """
    check_choice("loss_type", loss_type, KTO_LOSSES)
    for name, t in (("policy_logps", policy_logps), ("ref_logps", ref_logps), ("labels", labels)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name}: expected a torch.Tensor of shape [N], got {type(t).__name__}")
    check_ndim("policy_logps", policy_logps, 1, "a [N] tensor of summed completion log-probs")
    for name, t in (("policy_logps", policy_logps), ("ref_logps", ref_logps)):
        check_floating(name, t)
    check_same_shape("ref_logps", ref_logps, "policy_logps", policy_logps)
    check_same_shape("labels", labels, "policy_logps", policy_logps)
    if labels.dtype != torch.bool:
        if not bool(((labels == 0) | (labels == 1)).all()):
            raise ValueError("labels: expected bools or 0/1 values (True = desirable), got other values")
        labels = labels.bool()
    check_range("beta", float(beta), low=0.0, low_open=True)
    check_range("desirable_weight", float(desirable_weight), low=0.0)
    check_range("undesirable_weight", float(undesirable_weight), low=0.0)

    if loss_type in KTO_USES_KL:
        for name, t in (("policy_kl_logps", policy_kl_logps), ("ref_kl_logps", ref_kl_logps)):
            if not isinstance(t, torch.Tensor):
                raise ValueError(f"{name}: loss_type 'kto' needs the mismatched pairs' summed log-probs "
                                 f"as a [M] tensor, got {type(t).__name__}")
        check_ndim("policy_kl_logps", policy_kl_logps, 1, "a [M] tensor of summed log-probs")
        check_same_shape("ref_kl_logps", ref_kl_logps, "policy_kl_logps", policy_kl_logps)
        kl = kto_kl_baseline(policy_kl_logps, ref_kl_logps).to(policy_logps.dtype)
    else:
        kl = torch.zeros((), dtype=policy_logps.dtype, device=policy_logps.device)

    logratios = policy_logps - ref_logps  # [N], the implicit reward r / beta
    desirable, undesirable = KTO_LOSSES[loss_type](logratios, kl, float(beta))  # [N] each
    losses = torch.where(labels, desirable_weight * desirable, undesirable_weight * undesirable)  # [N]
    return reduce(losses, reduction)


def kto_metrics(policy_logps: torch.Tensor, ref_logps: torch.Tensor, labels: torch.Tensor,
                policy_kl_logps: torch.Tensor | None = None, ref_kl_logps: torch.Tensor | None = None, *,
                beta: float = 0.1) -> dict[str, float]:
    """TRL's KTO metrics as floats: ``kl`` (z_0, 0.0 without KL inputs), ``rewards/chosen`` and
    ``rewards/rejected`` (mean beta * r over desirable / undesirable examples, NaN when there are none),
    ``rewards/margins``, ``logps/chosen``, ``logps/rejected``."""
    labels = torch.as_tensor(labels).bool()
    with torch.no_grad():
        kl = 0.0 if policy_kl_logps is None else kto_kl_baseline(policy_kl_logps, ref_kl_logps).item()
        rewards = beta * (policy_logps - ref_logps)
        nan = float("nan")
        chosen = rewards[labels].mean().item() if bool(labels.any()) else nan
        rejected = rewards[~labels].mean().item() if bool((~labels).any()) else nan
        return {
            "kl": kl,
            "rewards/chosen": chosen,
            "rewards/rejected": rejected,
            "rewards/margins": chosen - rejected,
            "logps/chosen": policy_logps[labels].mean().item() if bool(labels.any()) else nan,
            "logps/rejected": policy_logps[~labels].mean().item() if bool((~labels).any()) else nan,
        }
