"""Predict: toy PPO with the KL coefficient 0, 0.05 and 0.5 (exercise toy-ppo).

``alignlings.toy_ppo.run_toy_ppo`` with its defaults (40 iterations of 64 responses, 4 epochs, seed
0) and only ``kl_coef`` changed. ``kl`` is the run's metric: the mean k1 estimate log pi - log pi_ref
over the sampled response tokens (nats per token), per iteration; ``score`` the batch's mean score
(the fraction of "a" among 4 positions).
"""

from __future__ import annotations

import math

import torch

from alignlings.toy_ppo import ToyPPOConfig, run_toy_ppo

COEFS = {"none": 0.0, "default": 0.05, "large": 0.5}
#: iterations at the end that are averaged (one batch of 64 is noisy)
TAIL = 5


def _tail_mean(xs: list[float]) -> float:
    return sum(xs[-TAIL:]) / TAIL


def run_ppo_kl_coef() -> dict:
    """Three runs, seed 0, one thread (run_toy_ppo pins it and restores the RNG); about 2 s on one core."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        runs = {name: run_toy_ppo(ToyPPOConfig(kl_coef=coef)) for name, coef in COEFS.items()}
    finally:
        torch.set_num_threads(threads)
    values = {}
    for name, r in runs.items():
        values[f"kl_{name}"] = _tail_mean(r.kl)
        values[f"score_{name}"] = _tail_mean(r.score)
    # "aaaa" with certainty costs log(1 / pi_ref("aaaa")) / 4 per token (where the unpenalised run ends; not the
    # most KL a policy could have: certainty on a sequence the reference finds less likely costs more)
    values["kl_certain"] = -math.log(runs["none"].p_target[0]) / 4
    # The optimum of E[score] - beta * KL(pi || pi_ref) is pi* ~ pi_ref * exp(score / beta). Treating each of
    # the 4 positions as an independent choice (EOS ignored), "a" is worth 1/4 and pi*(a) follows:
    p_ref_a = math.exp(-values["kl_certain"])  # pi_ref's geometric-mean P("a") per position
    values["p_ref_a"] = p_ref_a
    for name in ("default", "large"):
        boost = p_ref_a * math.exp(0.25 / COEFS[name])
        values[f"optimum_{name}"] = boost / (boost + 1 - p_ref_a)
    return {"values": values, "series": {f"kl_{name}": list(r.kl) for name, r in runs.items()}}


def supports_ppo_kl_coef(result: dict) -> int:
    """0: 0.05 already holds the KL far below the unpenalised run; 1: all three end about the same;
    2: 0 and 0.05 end close, only 0.5 stays near the reference; 3: without a penalty the KL keeps
    growing while both penalised runs stay near 0. -1 when the numbers fit none of them."""
    v, kl_none = result["values"], result["series"]["kl_none"]
    none, default, large = v["kl_none"], v["kl_default"], v["kl_large"]
    if none <= 0:
        return -1
    still_growing = sum(kl_none[-TAIL:]) / TAIL - sum(kl_none[-4 * TAIL:-3 * TAIL]) / TAIL > 0.2
    if still_growing and default < 0.25 * none and large < 0.25 * none:
        return 3
    if abs(default - none) < 0.2 * none and abs(large - none) < 0.2 * none:
        return 1
    if abs(default - none) < 0.2 * none and large < 0.2 * none:
        return 2
    if default < 0.5 * none:
        return 0
    return -1
