"""Direct Preference Optimization and its pairwise variants, as pure functions.

DPO: Rafailov et al., "Direct Preference Optimization: Your Language Model is Secretly a Reward
Model" (2023). The variants follow TRL 1.16's ``DPOTrainer._compute_loss`` term for term, so a
loss computed here equals TRL's on the same summed log-probs.

Notation (shared by every loss below), all of shape [B]:
    chosen_logratios   = log pi_theta(y_w|x) - log pi_ref(y_w|x)        (Delta_c)
    rejected_logratios = log pi_theta(y_l|x) - log pi_ref(y_l|x)        (Delta_r)
    delta              = chosen_logratios - rejected_logratios          (Delta)
Each loss is a small function ``f(batch: DPOBatch) -> [B]`` registered in ``DPO_LOSSES``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from alignlings._validate import check_choice, check_floating, check_ndim, check_range, check_same_shape, reduce

#: DiscoPOP's temperature tau (TRL's ``DPOConfig.discopop_tau`` default).
DISCOPOP_TAU = 0.05


@dataclass(frozen=True)
class DPOBatch:
    """Everything a pairwise loss may read; built once by :func:`dpo_loss`."""

    beta: float
    label_smoothing: float
    policy_chosen_logps: torch.Tensor  # [B]
    policy_rejected_logps: torch.Tensor  # [B]
    ref_chosen_logps: torch.Tensor  # [B]
    ref_rejected_logps: torch.Tensor  # [B]
    chosen_lengths: torch.Tensor | None  # [B] completion token counts
    rejected_lengths: torch.Tensor | None  # [B]

    @property
    def chosen_logratios(self) -> torch.Tensor:
        return self.policy_chosen_logps - self.ref_chosen_logps

    @property
    def rejected_logratios(self) -> torch.Tensor:
        return self.policy_rejected_logps - self.ref_rejected_logps

    @property
    def delta(self) -> torch.Tensor:
        return self.chosen_logratios - self.rejected_logratios

    def length_normalised_delta(self) -> torch.Tensor:
        # TRL divides each summed log-ratio by its completion length (at least 1 token).
        chosen_avg = self.chosen_logratios / self.chosen_lengths.clamp(min=1.0)
        rejected_avg = self.rejected_logratios / self.rejected_lengths.clamp(min=1.0)
        return chosen_avg - rejected_avg


def _cdpo(logits: torch.Tensor, eps: float) -> torch.Tensor:
    """Conservative DPO: labels flipped with probability eps (Mitchell, 2023)."""
    return -F.logsigmoid(logits) * (1 - eps) - F.logsigmoid(-logits) * eps


def sigmoid_loss(b: DPOBatch) -> torch.Tensor:
    """-log sigma(beta * Delta): the DPO paper's loss (TRL 1.16 applies no label smoothing here)."""
    return -F.logsigmoid(b.beta * b.delta)


def hinge_loss(b: DPOBatch) -> torch.Tensor:
    """relu(1 - beta * Delta): SLiC-HF (Zhao et al., 2023)."""
    return torch.relu(1 - b.beta * b.delta)


def ipo_loss(b: DPOBatch) -> torch.Tensor:
    """(Delta_c/|c| - Delta_r/|r| - 1/(2 beta))^2: IPO (Azar et al., 2023), length-normalised as in TRL."""
    return (b.length_normalised_delta() - 1 / (2 * b.beta)) ** 2


def robust_loss(b: DPOBatch) -> torch.Tensor:
    """rDPO (Chowdhury et al., 2024): unbiased under label noise eps; needs eps < 0.5."""
    logits = b.beta * b.delta
    clean = -(1 - b.label_smoothing) * F.logsigmoid(logits)
    flipped = -b.label_smoothing * F.logsigmoid(-logits)
    return (clean - flipped) / (1 - 2 * b.label_smoothing)


def exo_pair_loss(b: DPOBatch) -> torch.Tensor:
    """EXO (Ji et al., 2024, Eq. 16): KL(p_theta || p_label) over {chosen, rejected}; needs eps > 0."""
    logits = b.beta * b.delta
    eps = torch.tensor(b.label_smoothing, dtype=logits.dtype, device=logits.device)
    q_w, log_q_w = torch.sigmoid(logits), F.logsigmoid(logits)
    q_l, log_q_l = torch.sigmoid(-logits), F.logsigmoid(-logits)
    log_p_w, log_p_l = torch.log1p(-eps), torch.log(eps)
    return q_w * (log_q_w - log_p_w) + q_l * (log_q_l - log_p_l)


def nca_pair_loss(b: DPOBatch) -> torch.Tensor:
    """NCA (Chen et al., 2024): absolute likelihoods, not only the margin."""
    chosen_rewards = b.beta * b.chosen_logratios
    rejected_rewards = b.beta * b.rejected_logratios
    return (
        -F.logsigmoid(chosen_rewards)
        - 0.5 * F.logsigmoid(-chosen_rewards)
        - 0.5 * F.logsigmoid(-rejected_rewards)
    )


def bco_pair_loss(b: DPOBatch) -> torch.Tensor:
    """BCO, paired form (Jung et al., 2024) without the running reward shift."""
    chosen_rewards = b.beta * b.chosen_logratios
    rejected_rewards = b.beta * b.rejected_logratios
    return -F.logsigmoid(chosen_rewards) - F.logsigmoid(-rejected_rewards)


def sppo_hard_loss(b: DPOBatch) -> torch.Tensor:
    """SPPO (Wu et al., 2024) with hard win probabilities 1 and 0."""
    winner_error = (b.chosen_logratios - 0.5 / b.beta) ** 2
    loser_error = (b.rejected_logratios + 0.5 / b.beta) ** 2
    return winner_error + loser_error


def aot_loss(b: DPOBatch) -> torch.Tensor:
    """AOT, paired (Melnyk et al., 2024): sort policy and reference log-ratio margins across the batch."""
    logratios = b.policy_chosen_logps - b.policy_rejected_logps
    ref_logratios = b.ref_chosen_logps - b.ref_rejected_logps
    logratios_sorted, _ = torch.sort(logratios, dim=0)
    ref_logratios_sorted, _ = torch.sort(ref_logratios, dim=0)
    return _cdpo(b.beta * (logratios_sorted - ref_logratios_sorted), b.label_smoothing)


def aot_unpaired_loss(b: DPOBatch) -> torch.Tensor:
    """AOT, unpaired: sort chosen and rejected log-ratios separately across the batch."""
    chosen_sorted, _ = torch.sort(b.chosen_logratios, dim=0)
    rejected_sorted, _ = torch.sort(b.rejected_logratios, dim=0)
    return _cdpo(b.beta * (chosen_sorted - rejected_sorted), b.label_smoothing)


def apo_zero_loss(b: DPOBatch) -> torch.Tensor:
    """APO-zero (D'Oosterlinck et al., 2024, Eq. 7): raise chosen, lower rejected likelihood."""
    losses_chosen = 1 - torch.sigmoid(b.beta * b.chosen_logratios)
    losses_rejected = torch.sigmoid(b.beta * b.rejected_logratios)
    return losses_chosen + losses_rejected


def apo_down_loss(b: DPOBatch) -> torch.Tensor:
    """APO-down (Eq. 8): lower both, the rejected more; for chosen answers worse than the model's own."""
    losses_chosen = torch.sigmoid(b.beta * b.chosen_logratios)
    losses_rejected = 1 - torch.sigmoid(b.beta * b.delta)
    return losses_chosen + losses_rejected


def discopop_loss(b: DPOBatch) -> torch.Tensor:
    """DiscoPOP (Chan Lu et al., 2024, Eq. 5): a logistic/exponential blend gated by sigma(beta*Delta/tau)."""
    logits = b.beta * b.delta
    modulation = torch.sigmoid(logits / DISCOPOP_TAU)
    logistic_component = -F.logsigmoid(logits)
    # exp(-logits) * modulation, computed in log space: for very negative logits exp(-logits) overflows
    # to inf while the modulation underflows to 0, and inf * 0 = NaN (TRL's form does that, here it is 0).
    exp_component_modulated = torch.exp(F.logsigmoid(logits / DISCOPOP_TAU) - logits)
    return logistic_component * (1 - modulation) + exp_component_modulated


def sigmoid_norm_loss(b: DPOBatch) -> torch.Tensor:
    """-log sigma(beta * (Delta_c/|c| - Delta_r/|r|)): the sigmoid loss on per-token log-ratios."""
    return -F.logsigmoid(b.beta * b.length_normalised_delta())


#: loss_type -> per-pair loss function [B]; TRL 1.16's pairwise DPO losses.
DPO_LOSSES: dict[str, Callable[[DPOBatch], torch.Tensor]] = {
    "sigmoid": sigmoid_loss,
    "hinge": hinge_loss,
    "ipo": ipo_loss,
    "robust": robust_loss,
    "exo_pair": exo_pair_loss,
    "nca_pair": nca_pair_loss,
    "bco_pair": bco_pair_loss,
    "sppo_hard": sppo_hard_loss,
    "apo_zero": apo_zero_loss,
    "apo_down": apo_down_loss,
    "discopop": discopop_loss,
    "sigmoid_norm": sigmoid_norm_loss,
    "aot": aot_loss,
    "aot_unpaired": aot_unpaired_loss,
}

#: loss types that divide the log-ratios by the completion lengths
LENGTH_NORMALISED = frozenset({"ipo", "sigmoid_norm"})


def _batch(
    policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps,
    beta, label_smoothing, chosen_lengths=None, rejected_lengths=None,
) -> DPOBatch:
    named = {
        "policy_chosen_logps": policy_chosen_logps,
        "policy_rejected_logps": policy_rejected_logps,
        "ref_chosen_logps": ref_chosen_logps,
        "ref_rejected_logps": ref_rejected_logps,
    }
    for name, t in named.items():  # type first, so a list gets a ValueError, not an AttributeError
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name}: expected a torch.Tensor of shape [B], got {type(t).__name__}")
    check_ndim("policy_chosen_logps", policy_chosen_logps, 1, "a [B] tensor of summed completion log-probs")
    for name, t in named.items():
        check_floating(name, t)
        check_same_shape(name, t, "policy_chosen_logps", policy_chosen_logps)
    for name, t in (("chosen_lengths", chosen_lengths), ("rejected_lengths", rejected_lengths)):
        if t is not None:
            check_same_shape(name, t, "policy_chosen_logps", policy_chosen_logps)
    check_range("beta", float(beta), low=0.0, low_open=True)
    check_range("label_smoothing", float(label_smoothing), low=0.0, high=1.0)
    return DPOBatch(
        beta=float(beta),
        label_smoothing=float(label_smoothing),
        policy_chosen_logps=policy_chosen_logps,
        policy_rejected_logps=policy_rejected_logps,
        ref_chosen_logps=ref_chosen_logps,
        ref_rejected_logps=ref_rejected_logps,
        chosen_lengths=None if chosen_lengths is None else chosen_lengths.to(policy_chosen_logps.dtype),
        rejected_lengths=None if rejected_lengths is None else rejected_lengths.to(policy_chosen_logps.dtype),
    )


def dpo_loss(
    policy_chosen_logps: torch.Tensor,
    policy_rejected_logps: torch.Tensor,
    ref_chosen_logps: torch.Tensor,
    ref_rejected_logps: torch.Tensor,
    *,
    beta: float = 0.1,
    loss_type: str = "sigmoid",
    label_smoothing: float = 0.0,
    chosen_lengths: torch.Tensor | None = None,
    rejected_lengths: torch.Tensor | None = None,
    reduction: str = "mean",
) -> torch.Tensor:
    """Pairwise preference loss on summed completion log-probs; equals TRL 1.16's DPOTrainer.

    Args:
        policy_chosen_logps: [B] sum over the completion tokens of log pi_theta(y_w|x); the prompt
            never counts.
        policy_rejected_logps: [B] the same for y_l.
        ref_chosen_logps: [B] the same under the frozen reference pi_ref (no gradient needed).
        ref_rejected_logps: [B].
        beta: strength of the pull toward the reference (default 0.1, as TRL and the DPO paper's
            usual setting); for ipo it is the regulariser tau of the IPO paper.
        loss_type: one of ``DPO_LOSSES``: sigmoid (default), hinge, ipo, robust, exo_pair, nca_pair,
            bco_pair, sppo_hard, apo_zero, apo_down, discopop, sigmoid_norm, aot, aot_unpaired.
        label_smoothing: the label-noise rate eps used by robust, exo_pair, aot and aot_unpaired
            (default 0.0). Like TRL 1.16, the sigmoid loss ignores it. exo_pair needs eps > 0 and
            robust needs eps < 0.5.
        chosen_lengths, rejected_lengths: [B] completion token counts, required by the
            length-normalised losses (ipo, sigmoid_norm); each is clamped to at least 1 as TRL does.
        reduction: "mean" (default) | "sum" | "none" (the [B] per-pair losses).

    Returns:
        The reduced loss (a scalar, or [B] for ``reduction="none"``).
    """
    check_choice("loss_type", loss_type, DPO_LOSSES)
    if loss_type in LENGTH_NORMALISED:
        for name, t in (("chosen_lengths", chosen_lengths), ("rejected_lengths", rejected_lengths)):
            if t is None:
                raise ValueError(
                    f"{name}: loss_type {loss_type!r} divides by completion lengths; "
                    "expected a [B] tensor of completion token counts, got None"
                )
    if loss_type == "exo_pair" and not label_smoothing > 0:
        raise ValueError(f"label_smoothing: exo_pair needs a value in (0, 1), got {label_smoothing!r}")
    if loss_type == "robust" and not label_smoothing < 0.5:
        raise ValueError(f"label_smoothing: robust needs a value in [0, 0.5), got {label_smoothing!r}")
    batch = _batch(
        policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps,
        beta, label_smoothing, chosen_lengths, rejected_lengths,
    )
    per_pair = DPO_LOSSES[loss_type](batch)  # [B]
    return reduce(per_pair, reduction)


def dpo_implicit_rewards(
    policy_chosen_logps: torch.Tensor,
    policy_rejected_logps: torch.Tensor,
    ref_chosen_logps: torch.Tensor,
    ref_rejected_logps: torch.Tensor,
    *,
    beta: float = 0.1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """DPO's implicit rewards r = beta * log(pi_theta / pi_ref) for y_w and y_l, each [B], detached.

    The partition term beta * log Z(x) cancels in every pairwise comparison and is left out.
    """
    b = _batch(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta, 0.0)
    return (b.beta * b.chosen_logratios).detach(), (b.beta * b.rejected_logratios).detach()


def dpo_metrics(
    policy_chosen_logps: torch.Tensor,
    policy_rejected_logps: torch.Tensor,
    ref_chosen_logps: torch.Tensor,
    ref_rejected_logps: torch.Tensor,
    *,
    beta: float = 0.1,
) -> dict[str, float]:
    """TRL's DPO metrics, batch means as floats.

    - ``rewards/chosen``: beta * Delta_c; ``rewards/rejected``: beta * Delta_r;
    - ``rewards/margins``: their difference; ``rewards/accuracies``: fraction with chosen > rejected (strict);
    - ``logps/chosen``, ``logps/rejected``: the policy's summed log-probs.
    """
    with torch.no_grad():
        chosen_rewards, rejected_rewards = dpo_implicit_rewards(
            policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=beta
        )
        values = torch.stack([  # one read-back instead of six; float64 holds each value exactly
            chosen_rewards.mean().double(),
            rejected_rewards.mean().double(),
            (chosen_rewards - rejected_rewards).mean().double(),
            (chosen_rewards > rejected_rewards).float().mean().double(),
            policy_chosen_logps.detach().mean().double(),
            policy_rejected_logps.detach().mean().double(),
        ]).tolist()
        keys = ("rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies", "logps/chosen",
                "logps/rejected")
        return dict(zip(keys, values))
