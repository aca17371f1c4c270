"""Predict: DPO's and IPO's margin on one preference pair trained for 200 Adam steps (exercise ipo).

The policy is a softmax over four one-token answers to one prompt (logits are the parameters, all 0 at
the start, so the policy starts equal to its reference, the uniform distribution). Answer 0 is chosen
over answer 1 in the only pair. The loss is ``alignlings.losses.dpo.dpo_loss`` (TRL 1.16's
DPOTrainer term for term) with ``loss_type="sigmoid"`` (DPO, beta = 0.1) or ``"ipo"`` (TRL's beta is
IPO's tau = 0.1); with one-token answers IPO's per-token averages equal the sums. The margin is
h = (log pi(y_w) - log pi_ref(y_w)) - (log pi(y_l) - log pi_ref(y_l)).
"""

from __future__ import annotations

import torch

from alignlings.losses.dpo import dpo_loss

BETA = 0.1  # DPO's beta; for IPO TRL's beta is the paper's tau
STEPS = 200
LR = 0.1
#: steps at the end over which the margin's growth is measured
TAIL = 50


def _train(loss_type: str) -> tuple[list[float], float]:
    """The margin before training (index 0) and after each step, and the final P(rejected)."""
    logits = torch.zeros(4, requires_grad=True)  # [4] answers; the policy starts at the reference
    ref_logps = torch.log_softmax(torch.zeros(4), dim=-1)  # uniform reference
    opt = torch.optim.Adam([logits], lr=LR)
    one_token = torch.ones(1)  # completion lengths (IPO divides each log-ratio by its length)

    def margin_of(logps: torch.Tensor) -> torch.Tensor:
        return (logps[0] - ref_logps[0]) - (logps[1] - ref_logps[1])

    margins = [margin_of(torch.log_softmax(logits.detach(), dim=-1)).item()]
    for _ in range(STEPS):
        logps = torch.log_softmax(logits, dim=-1)
        loss = dpo_loss(logps[0:1], logps[1:2], ref_logps[0:1], ref_logps[1:2], beta=BETA, loss_type=loss_type,
                        chosen_lengths=one_token, rejected_lengths=one_token)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        margins.append(margin_of(torch.log_softmax(logits.detach(), dim=-1)).item())
    return margins, torch.softmax(logits.detach(), dim=-1)[1].item()


def run_ipo_margin() -> dict:
    """Both runs (no randomness: zero init, one fixed pair), one thread; about 0.1 s on one core."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        dpo, dpo_p_rejected = _train("sigmoid")
        ipo, ipo_p_rejected = _train("ipo")
    finally:
        torch.set_num_threads(threads)
    return {
        "values": {
            "target": 1 / (2 * BETA),
            "dpo_margin": dpo[-1],
            "ipo_margin": ipo[-1],
            "dpo_growth": dpo[-1] - dpo[-1 - TAIL],
            "ipo_growth": ipo[-1] - ipo[-1 - TAIL],
            "dpo_p_rejected": dpo_p_rejected,
            "ipo_p_rejected": ipo_p_rejected,
        },
        "series": {"dpo": dpo[1:], "ipo": ipo[1:]},  # after each step: 200 points
    }


def supports_ipo_margin(result: dict) -> int:
    """0: both settle at about the same margin; 1: DPO settles, IPO keeps growing; 2: DPO keeps
    growing, IPO settles at 1/(2 tau); 3: both keep growing. -1 when the numbers fit none of them.

    "Keeps growing": the margin rose by more than 1 over the last TAIL steps; "settles": by less than
    0.2 in absolute value."""
    v = result["values"]
    dpo_grows, ipo_grows = v["dpo_growth"] > 1.0, v["ipo_growth"] > 1.0
    dpo_settles, ipo_settles = abs(v["dpo_growth"]) < 0.2, abs(v["ipo_growth"]) < 0.2
    if dpo_grows and ipo_grows:
        return 3
    if dpo_grows and ipo_settles and abs(v["ipo_margin"] - v["target"]) < 0.25:
        return 2
    if dpo_settles and ipo_grows:
        return 1
    if dpo_settles and ipo_settles and abs(v["dpo_margin"] - v["ipo_margin"]) < 0.25 * max(abs(v["ipo_margin"]), 1.0):
        return 0
    return -1
