"""Predict: toy GRPO with and without the old-policy sync (exercise toy-grpo's last blank).

The loop of ``alignlings.toy_grpo`` (its model, its defaults: 40 iterations, G = 32, 2 inner Adam
steps, clip 0.2, k3 KL 0.04), run twice from the same seed: once with ``pi_old <- pi_theta`` after
each iteration, once with ``pi_old`` left at the initial model, so that it samples every group and
every ratio is measured against it.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from alignlings.losses.kl import kl_k3
from alignlings.toy_grpo import BOS, TARGET, ToyGRPOConfig, build_toy_policy

#: iterations at the end over which the clip fraction is averaged
TAIL = 10


def _train(sync: bool, config: ToyGRPOConfig) -> tuple[list[float], list[float]]:
    """P("a") before training and after each iteration, and the clip fraction of each iteration's
    last inner step (the share of samples whose clipped term is the one selected)."""
    torch.manual_seed(config.seed)
    policy = build_toy_policy()
    ref = copy.deepcopy(policy).requires_grad_(False)
    old = copy.deepcopy(policy).requires_grad_(False)
    prompt = torch.tensor([[BOS]])  # [1, 1]
    opt = torch.optim.Adam(policy.parameters(), lr=config.lr)

    def last_logits(model) -> torch.Tensor:
        return model(input_ids=prompt, use_cache=False).logits[0, -1]  # [V]

    with torch.no_grad():
        ref_logprobs_all = F.log_softmax(last_logits(ref), dim=-1)
        p_target = [F.softmax(last_logits(policy), dim=-1)[TARGET].item()]
    clipfrac = []
    for _ in range(config.iterations):
        with torch.no_grad():
            old_logits = last_logits(old)
            samples = torch.multinomial(F.softmax(old_logits, dim=-1), config.group_size, replacement=True)  # [G]
            old_logprobs = F.log_softmax(old_logits, dim=-1)[samples]
            ref_logprobs = ref_logprobs_all[samples]
        rewards = (samples == TARGET).float()
        advantages = (rewards - rewards.mean()) / (rewards.std() + config.adv_eps)
        for _ in range(config.inner_steps):
            logprobs = F.log_softmax(last_logits(policy), dim=-1)[samples]
            ratio = torch.exp(logprobs - old_logprobs)
            unclipped = ratio * advantages
            clipped = torch.clamp(ratio, 1 - config.clip, 1 + config.clip) * advantages
            pg = torch.min(unclipped, clipped)
            loss = -(pg - config.kl_coef * kl_k3(ref_logprobs - logprobs)).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        with torch.no_grad():  # the clipped term selected: ratio past the clip in the advantage's direction
            outside = ((ratio > 1 + config.clip) & (advantages > 0)) | ((ratio < 1 - config.clip) & (advantages < 0))
            clipfrac.append(outside.float().mean().item())
        if sync:
            old.load_state_dict(policy.state_dict())
        with torch.no_grad():
            p_target.append(F.softmax(last_logits(policy), dim=-1)[TARGET].item())
    return p_target, clipfrac


def run_old_policy_sync() -> dict:
    """Both runs, seed 0, one thread; about 0.3 s on one core after the imports."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]):
            config = ToyGRPOConfig()
            p_sync, _ = _train(True, config)
            p_nosync, clip_nosync = _train(False, config)
    finally:
        torch.set_num_threads(threads)
    return {
        "values": {
            "start": p_sync[0],
            "p_sync": p_sync[-1],
            "p_nosync": p_nosync[-1],
            "p_nosync_peak": max(p_nosync),
            "clipfrac_nosync": sum(clip_nosync[-TAIL:]) / TAIL,
        },
        "series": {"sync": p_sync, "no_sync": p_nosync},
    }


def supports_old_policy_sync(result: dict) -> int:
    """0: no sync changes nothing; 1: P(a) stalls well below the synced run; 2: it rises, then
    collapses; 3: it never moves. -1 when the numbers fit none of them."""
    v = result["values"]
    tail = result["series"]["no_sync"][-TAIL:]
    if v["p_nosync_peak"] < v["start"] + 0.05:
        return 3
    if v["p_nosync_peak"] > 0.9 and v["p_nosync"] < v["p_nosync_peak"] - 0.3:
        return 2
    if abs(v["p_nosync"] - v["p_sync"]) < 0.1:
        return 0
    if v["p_sync"] > 0.9 and v["p_nosync"] < 0.6 and max(tail) - min(tail) < 0.15:
        return 1
    return -1
