"""CPO and SimPO: reference-free preference losses, as pure functions.

CPO: Xu et al., "Contrastive Preference Optimization: Pushing the Boundaries of LLM Performance in
Machine Translation" (2024), Eq. 3: DPO's loss with the reference dropped (pi_ref uniform) plus a
behaviour-cloning NLL term on the chosen answers, weighted by ``cpo_alpha``.
SimPO: Meng, Xia and Chen, "SimPO: Simple Preference Optimization with a Reference-Free Reward"
(2024), Eq. 6: the reward is the *average* per-token log-prob, beta * log pi(y|x) / |y|, and the
Bradley-Terry margin must exceed a target gamma.

The losses follow TRL 1.16's ``trl.experimental.cpo.CPOTrainer.cpo_loss`` term for term and the
total ``losses.mean() + cpo_alpha * nll_loss`` of its ``get_batch_loss_metrics``. Like TRL, ipo and
simpo see length-averaged log-probs (``average_log_prob=True``) and sigmoid and hinge summed ones;
here the caller passes summed log-probs and completion lengths and the function divides.

Notation, all of shape [B]:
    logp_w, logp_l = policy log-probs of the chosen / rejected completion (summed, or averaged
                     for ipo and simpo)
    logits         = logp_w - logp_l        (TRL's name; no reference terms)
Each loss is a small function ``f(logits, beta, label_smoothing, simpo_gamma) -> [B]`` registered in
``CPO_LOSSES``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from alignlings._validate import check_choice, check_floating, check_ndim, check_range, check_same_shape, reduce


def _smoothed_sigmoid(logits: torch.Tensor, beta: float, label_smoothing: float) -> torch.Tensor:
    # conservative form: labels flipped with probability eps (Mitchell, 2023); eps = 0 is CPO's Eq. 3
    return -F.logsigmoid(beta * logits) * (1 - label_smoothing) - F.logsigmoid(-beta * logits) * label_smoothing


def cpo_sigmoid_loss(logits, beta, label_smoothing, simpo_gamma) -> torch.Tensor:
    """-log sigma(beta * (logp_w - logp_l)): CPO's Eq. 3 on summed log-probs."""
    return _smoothed_sigmoid(logits, beta, label_smoothing)


def cpo_hinge_loss(logits, beta, label_smoothing, simpo_gamma) -> torch.Tensor:
    """relu(1 - beta * (logp_w - logp_l)): SLiC's hinge without a reference."""
    return torch.relu(1 - beta * logits)


def cpo_ipo_loss(logits, beta, label_smoothing, simpo_gamma) -> torch.Tensor:
    """(logp_w/|w| - logp_l/|l| - 1/(2 beta))^2: IPO's squared loss (Azar et al., 2023, Eq. 17), no reference."""
    return (logits - 1 / (2 * beta)) ** 2


def cpo_simpo_loss(logits, beta, label_smoothing, simpo_gamma) -> torch.Tensor:
    """-log sigma(beta * (logp_w/|w| - logp_l/|l|) - gamma): SimPO's Eq. 6."""
    gamma_logratios = simpo_gamma / beta  # TRL subtracts gamma/beta inside, so beta * (...) - gamma
    return _smoothed_sigmoid(logits - gamma_logratios, beta, label_smoothing)


#: loss_type -> per-pair loss function [B]; TRL 1.16's CPOTrainer loss types.
CPO_LOSSES: dict[str, Callable[..., torch.Tensor]] = {
    "sigmoid": cpo_sigmoid_loss,
    "hinge": cpo_hinge_loss,
    "ipo": cpo_ipo_loss,
    "simpo": cpo_simpo_loss,
}

#: loss types that compare length-averaged log-probs (TRL's ``average_log_prob=loss_type in ["ipo", "simpo"]``)
CPO_LENGTH_NORMALISED = frozenset({"ipo", "simpo"})


def cpo_loss(
    policy_chosen_logps: torch.Tensor,
    policy_rejected_logps: torch.Tensor,
    *,
    beta: float = 0.1,
    loss_type: str = "sigmoid",
    label_smoothing: float = 0.0,
    simpo_gamma: float = 0.5,
    cpo_alpha: float = 1.0,
    nll_loss: torch.Tensor | float | None = None,
    chosen_lengths: torch.Tensor | None = None,
    rejected_lengths: torch.Tensor | None = None,
    reduction: str = "mean",
) -> torch.Tensor:
    """Reference-free preference loss plus ``cpo_alpha * nll_loss``; equals TRL 1.16's CPOTrainer.

    Args:
        policy_chosen_logps: [B] sum over the completion tokens of log pi_theta(y_w|x).
        policy_rejected_logps: [B] the same for y_l.
        beta: temperature of the preference term (default 0.1, TRL's ``CPOConfig.beta``); for ipo
            the regulariser tau; SimPO's paper uses 2.0-10.0 with its length-normalised reward.
        loss_type: one of ``CPO_LOSSES``: sigmoid (default, CPO), hinge, ipo, simpo.
        label_smoothing: label-noise rate eps of the sigmoid and simpo losses (default 0.0).
        simpo_gamma: SimPO's target reward margin gamma (default 0.5, TRL's); simpo only.
        cpo_alpha: weight of the NLL (behaviour cloning) term (default 1.0, TRL's; the CPO paper's
            L_prefer + L_NLL). SimPO trains with 0.0. Nonzero needs ``nll_loss``.
        nll_loss: scalar cross-entropy of the chosen completions (TRL: token mean over the chosen
            half of the batch), or [B] per-pair values; ignored when cpo_alpha is 0.
        chosen_lengths, rejected_lengths: [B] completion token counts, required by ipo and simpo,
            which compare average log-probs (logp / length; lengths clamped to at least 1).
        reduction: "mean" (default) | "sum" | "none". The NLL term is added to each pair's loss
            before the reduction, so a scalar NLL with "mean" gives TRL's ``losses.mean() + alpha * nll``.

    Returns:
        The reduced loss (a scalar, or [B] for ``reduction="none"``).
    """
    check_choice("loss_type", loss_type, CPO_LOSSES)
    for name, t in (("policy_chosen_logps", policy_chosen_logps), ("policy_rejected_logps", policy_rejected_logps)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name}: expected a torch.Tensor of shape [B], got {type(t).__name__}")
        check_floating(name, t)
    check_ndim("policy_chosen_logps", policy_chosen_logps, 1, "a [B] tensor of summed completion log-probs")
    check_same_shape("policy_rejected_logps", policy_rejected_logps, "policy_chosen_logps", policy_chosen_logps)
    check_range("beta", float(beta), low=0.0, low_open=True)
    check_range("label_smoothing", float(label_smoothing), low=0.0, high=1.0)
    check_range("cpo_alpha", float(cpo_alpha), low=0.0)

    chosen_logps, rejected_logps = policy_chosen_logps, policy_rejected_logps
    if loss_type in CPO_LENGTH_NORMALISED:
        lengths = {}
        for name, t in (("chosen_lengths", chosen_lengths), ("rejected_lengths", rejected_lengths)):
            if t is None:
                raise ValueError(f"{name}: loss_type {loss_type!r} compares average log-probs; "
                                 "expected a [B] tensor of completion token counts, got None")
            if not isinstance(t, torch.Tensor):
                t = torch.as_tensor(t)
            check_same_shape(name, t, "policy_chosen_logps", policy_chosen_logps)
            lengths[name] = t.to(policy_chosen_logps.dtype).clamp(min=1.0)
        chosen_logps = chosen_logps / lengths["chosen_lengths"]  # average per-token log-prob
        rejected_logps = rejected_logps / lengths["rejected_lengths"]

    logits = chosen_logps - rejected_logps  # [B]; no reference terms: pi_ref is taken as uniform
    losses = CPO_LOSSES[loss_type](logits, float(beta), float(label_smoothing), float(simpo_gamma))  # [B]

    if cpo_alpha != 0:
        if nll_loss is None:
            raise ValueError(
                f"nll_loss: cpo_alpha={cpo_alpha!r} adds cpo_alpha * nll_loss (the chosen answers' "
                "cross-entropy); pass it, or set cpo_alpha=0.0 (SimPO's setting)"
            )
        nll = torch.as_tensor(nll_loss, dtype=losses.dtype, device=losses.device)
        if nll.dim() not in (0, 1) or (nll.dim() == 1 and nll.shape != losses.shape):
            raise ValueError(f"nll_loss: expected a scalar or a [B] tensor with B = {losses.shape[0]}, "
                             f"got shape {tuple(nll.shape)}")
        losses = losses + cpo_alpha * nll
    return reduce(losses, reduction)
