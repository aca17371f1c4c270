"""What does clipfrac do when the learning rate is x10?

A tiny PPO-style loop: a tabular softmax policy over 8 actions in 16 states samples one batch
(16 actions per state, seeded), the advantages are the rewards minus their per-state mean, and the
policy takes several Adam updates on that same batch with ``alignlings.losses.ppo_policy_loss``
(clip range 0.2), logging TRL's ``policy/clipfrac_avg`` (``ppo_policy_metrics``) before each update.
The same loop runs at the learning rate and at 10x it, from the same start and batch.
"""

from __future__ import annotations

import torch

from alignlings.losses.ppo import ppo_policy_loss, ppo_policy_metrics

S, V, N = 16, 8, 16  # states, actions, samples per state
UPDATES = 8  # gradient steps on the one batch (PPO's epochs x minibatches)
LR = 0.02
CLIP = 0.2


def _batch():
    g = torch.Generator().manual_seed(0)
    init = 0.5 * torch.randn(S, V, generator=g)
    reward = torch.randn(S, V, generator=g)
    probs = torch.softmax(init, -1)
    actions = torch.multinomial(probs, N, replacement=True, generator=g)  # [S, N]
    r = reward.gather(1, actions)  # [S, N]
    adv = (r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-6)
    return init, actions, adv


def _clipfracs(lr: float) -> list[float]:
    """clipfrac measured before each of the UPDATES steps and after the last one."""
    torch.manual_seed(0)
    init, actions, adv = _batch()
    logits = init.clone().requires_grad_(True)
    mask = torch.ones(S, N)
    with torch.no_grad():
        old_logps = torch.log_softmax(init, -1).gather(1, actions)  # pi_old: the sampler, fixed
    opt = torch.optim.Adam([logits], lr=lr)
    out = []
    for _ in range(UPDATES + 1):
        logps = torch.log_softmax(logits, -1).gather(1, actions)  # [S, N]
        out.append(ppo_policy_metrics(logps.detach(), old_logps, adv, mask, clip_range=CLIP)["policy/clipfrac_avg"])
        if len(out) > UPDATES:
            break
        loss = ppo_policy_loss(logps, old_logps, adv, mask, clip_range=CLIP)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return out


def run_clipfrac_lr() -> dict:
    torch.set_num_threads(1)
    base, fast = _clipfracs(LR), _clipfracs(10 * LR)
    return {"values": {"lr": LR, "lr10": 10 * LR, "final_base": base[-1], "final_fast": fast[-1],
                       "max_base": max(base), "max_fast": max(fast)},
            "series": {"base": base, "fast": fast}}


def supports_clipfrac_lr(result: dict) -> int:
    """0: stays at 0 in both; 1: rises far higher at 10x; 2: about the same; 3: lower at 10x."""
    v = result["values"]
    if v["max_fast"] < 0.01 and v["max_base"] < 0.01:
        return 0
    if abs(v["final_fast"] - v["final_base"]) < 0.05:
        return 2
    if v["final_fast"] > 3 * v["final_base"] + 0.1:
        return 1
    if v["final_fast"] < v["final_base"]:
        return 3
    return -1
