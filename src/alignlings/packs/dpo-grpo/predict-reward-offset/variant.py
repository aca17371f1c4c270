"""Predict: what a constant added to every reward does to Bradley-Terry training (exercise
reward-pooling's loss).

A tiny reward model (a Linear(8, 16) + tanh backbone and a Linear(16, 1) value head) learns 256
synthetic preference pairs whose chosen response scores higher under a hidden linear reward; it is
evaluated on 512 held-out pairs. Two runs with the same seed differ only in the value head's bias at
the start: 0 (run A) or +5 (run B), so B's rewards start exactly 5 above A's. Loss:
``alignlings.losses.reward.bradley_terry_loss`` (TRL 1.16's RewardTrainer), chosen and rejected scored
in one forward pass as TRL does, full-batch Adam (lr 1e-2) for 150 steps.
"""

from __future__ import annotations

import torch

from alignlings.losses.reward import bradley_terry_loss

D, H = 8, 16  # feature size, backbone width
OFFSET = 5.0
STEPS = 150
SEED = 0


def _pairs(generator: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n (chosen, rejected) feature pairs [n, D]: the one with the higher hidden reward is chosen."""
    w = torch.tensor([1.0, -1.0, 0.5, 0.0, 2.0, -0.5, 0.0, 1.0])  # the hidden "human" reward
    a, b = torch.randn(n, D, generator=generator), torch.randn(n, D, generator=generator)
    swap = (a @ w < b @ w).unsqueeze(1)
    return torch.where(swap, b, a), torch.where(swap, a, b)


def _train(bias: float) -> tuple[list[float], list[float], float, float]:
    """Loss and mean reward before each step and after the last, held-out accuracy, final head bias."""
    generator = torch.Generator().manual_seed(SEED)
    chosen, rejected = _pairs(generator, 256)
    test_chosen, test_rejected = _pairs(generator, 512)
    torch.manual_seed(SEED)
    backbone = torch.nn.Linear(D, H)  # built before the head: the order fixes the initial weights
    head = torch.nn.Linear(H, 1)  # the value head
    model = torch.nn.Sequential(backbone, torch.nn.Tanh(), head)
    with torch.no_grad():
        head.bias.fill_(bias)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses, mean_rewards = [], []
    for step in range(STEPS + 1):
        rewards = model(torch.cat([chosen, rejected])).squeeze(-1)  # [2n], one forward pass as TRL
        chosen_rewards, rejected_rewards = rewards.chunk(2)
        loss = bradley_terry_loss(chosen_rewards, rejected_rewards)
        losses.append(loss.item())
        mean_rewards.append(rewards.mean().item())
        if step == STEPS:
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    with torch.no_grad():
        accuracy = (model(test_chosen) > model(test_rejected)).float().mean().item()
    return losses, mean_rewards, accuracy, head.bias.item()


def run_reward_offset() -> dict:
    """Both runs, seeded, one thread; about 0.1 s on one core."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]):
            loss_a, reward_a, acc_a, bias_a = _train(0.0)
            loss_b, reward_b, acc_b, bias_b = _train(OFFSET)
    finally:
        torch.set_num_threads(threads)
    return {
        "values": {
            "loss_start": loss_a[0],
            "loss_a": loss_a[-1],
            "loss_b": loss_b[-1],
            "acc_a": acc_a,
            "acc_b": acc_b,
            "offset_start": reward_b[0] - reward_a[0],
            "offset_end": reward_b[-1] - reward_a[-1],
            "bias_b_end": bias_b,
            "loss_gap_max": max(abs(x - y) for x, y in zip(loss_a, loss_b, strict=True)),
        },
        "series": {"a": reward_a, "b": reward_b, "loss_a": loss_a, "loss_b": loss_b},
    }


def supports_reward_offset(result: dict) -> int:
    """0: same losses and accuracies, the offset kept; 1: B's offset trained away, same end; 2: B ends
    with the lower loss; 3: B learns more slowly (higher loss). -1 when the numbers fit none of them."""
    v = result["values"]
    same_loss = v["loss_gap_max"] < 1e-3 and abs(v["acc_a"] - v["acc_b"]) < 0.01
    if v["loss_b"] < v["loss_a"] - 0.01:
        return 2
    if v["loss_b"] > v["loss_a"] + 0.01:
        return 3
    if same_loss and abs(v["offset_end"] - v["offset_start"]) < 0.1 * abs(v["offset_start"]):
        return 0
    if abs(v["offset_end"]) < 0.2 * abs(v["offset_start"]):
        return 1
    return -1
