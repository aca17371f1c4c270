"""Toy GRPO end to end: teach a one-layer GPT-2 to answer <bos> with the token "a" (exercise 6).

GRPO is Group Relative Policy Optimization (Shao et al., "DeepSeekMath: Pushing the Limits of
Mathematical Reasoning in Open Language Models", 2024): PPO's clipped surrogate (Schulman et al.,
2017) without a critic; the advantage of each response is its reward z-scored within the group of
G responses sampled for the same prompt. The KL penalty to the reference uses Schulman's k3
estimator (``alignlings.losses.kl.kl_k3``).

The task is a one-step bandit: vocabulary a..i (ids 0..8) plus <bos> (id 9), the prompt is <bos>,
the response one token, reward 1 for "a" (id 0) and 0 otherwise. P("a") starts near 1/10.

Each iteration:
    1. sample G tokens from pi_old's last-position distribution (with replacement, no grad),
       keeping their log-probs log pi_old;
    2. rewards r in {0, 1}; advantages A = (r - mean(r)) / (std(r) + eps)  (torch.std: unbiased);
    3. ``inner_steps`` Adam steps on  L = -mean( min(rho*A, clip(rho, 1-eps, 1+eps)*A) - beta*k3 ),
       rho = exp(log pi_theta - log pi_old), k3 from log r = log pi_ref - log pi_theta;
    4. pi_old <- pi_theta (the sync learners forget: without it rho stays relative to the
       first policy and clipping freezes learning).

Dropout is switched off (all three models in eval mode, like TRL's ``disable_dropout``): with it,
pi_theta and pi_old would disagree even with identical weights and rho would be noise, not 1.

Importing this module has no side effects; :func:`run_toy_grpo` seeds and restores torch's global
RNG and thread count around the run. Metric names: ``p_target`` = P("a" | <bos>) under the policy
after each iteration (index 0 = before training); ``loss`` = the surrogate loss averaged over the
inner steps of each iteration; ``reward`` = the group's mean reward (TRL's ``reward``).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F

from alignlings.losses.kl import kl_k3
from alignlings.toy_common import TargetCurve, check_counts, check_seed_and_lr, run_seeded

#: vocabulary: letters a..i are ids 0..8, <bos> is id 9
VOCAB_SIZE = 10
TARGET = 0  # "a"
BOS = 9
#: torch threads during a run; 1 is fastest for a 16-wide model (thread hand-off costs more than it saves)
NUM_THREADS = 1


@dataclass
class ToyGRPOConfig:
    """Hyper-parameters of the toy run; the defaults are exercise 6's."""

    seed: int = 0
    """``torch.manual_seed`` before the policy is built; fixes initialisation and sampling (default 0)."""
    iterations: int = 40
    """Sample-then-update rounds (default 40)."""
    group_size: int = 32
    """G, responses sampled per round for the one prompt (default 32; TRL's ``num_generations``)."""
    inner_steps: int = 2
    """Optimizer steps per sampled group, reusing it (default 2; TRL's ``num_iterations`` mu)."""
    lr: float = 3e-3
    """Adam learning rate (default 3e-3)."""
    clip: float = 0.2
    """epsilon of the clipped ratio range [1 - eps, 1 + eps] (default 0.2, as PPO and TRL's ``epsilon``)."""
    kl_coef: float = 0.04
    """beta, weight of the k3 KL penalty to the reference (default 0.04, the DeepSeekMath paper's; TRL's ``beta``)."""
    adv_eps: float = 1e-8
    """eps added to the group's std in the z-score (default 1e-8, exercise 6's; TRL uses 1e-4)."""

    def __post_init__(self) -> None:
        check_counts(self, "iterations", "group_size", "inner_steps")
        check_seed_and_lr(self)
        if not 0 <= self.clip < 1:
            raise ValueError(f"clip: expected a value in [0, 1), got {self.clip!r}")
        if not self.kl_coef >= 0:
            raise ValueError(f"kl_coef: expected a value >= 0, got {self.kl_coef!r}")
        if not self.adv_eps >= 0:
            raise ValueError(f"adv_eps: expected a value >= 0, got {self.adv_eps!r}")


@dataclass
class ToyGRPOResult(TargetCurve):
    """What a run produced; ``to_dict()`` is JSON-ready."""

    config: ToyGRPOConfig
    p_target: list[float]
    """P("a") before training (index 0) and after each iteration: ``iterations + 1`` values."""
    loss: list[float]
    """Surrogate loss per iteration, averaged over the inner steps: ``iterations`` values."""
    reward: list[float] = field(default_factory=list)
    """Mean reward of each sampled group (the fraction of "a"): ``iterations`` values."""
    train_seconds: float = 0.0
    """Wall time of the training loop (model building excluded)."""

    @property
    def iterations(self) -> int:
        return len(self.loss)

    def to_dict(self) -> dict:
        return {
            "p_target_initial": self.p_target_initial,
            "p_target_final": self.p_target_final,
            "iterations": self.iterations,
            "train_seconds": self.train_seconds,
            **asdict(self.config),
            "p_target": list(self.p_target),
            "loss": list(self.loss),
            "reward": list(self.reward),
        }


def toy_gpt2_config(n_positions: int = 4):
    """Exercise 6's model: GPT2Config(vocab_size=10, n_positions=4, n_embd=16, n_layer=1, n_head=2);
    ``n_positions`` longer for a longer response (toy PPO: 5).

    bos/eos are set to <bos> (id 9) only so that transformers does not warn about GPT-2's default
    id 50256 lying outside the 10-token vocabulary; nothing here generates with them.
    """
    from transformers import GPT2Config

    return GPT2Config(
        vocab_size=VOCAB_SIZE, n_positions=n_positions, n_embd=16, n_layer=1, n_head=2, bos_token_id=BOS, eos_token_id=BOS
    )


def build_toy_policy():
    """A freshly initialised ``GPT2LMHeadModel`` of :func:`toy_gpt2_config`, dropout off (eval mode)."""
    from transformers import GPT2LMHeadModel

    return GPT2LMHeadModel(toy_gpt2_config()).eval()


def _last_logits(model, prompt: torch.Tensor) -> torch.Tensor:
    return model(input_ids=prompt, use_cache=False).logits[0, -1]  # [V]


def _train(config: ToyGRPOConfig, callback: Callable[[int, float, float], None] | None) -> ToyGRPOResult:
    G = config.group_size
    torch.manual_seed(config.seed)
    policy = build_toy_policy()
    ref = copy.deepcopy(policy).requires_grad_(False)  # frozen pi_ref
    old = copy.deepcopy(policy).requires_grad_(False)  # pi_old, the sampler
    prompt = torch.tensor([[BOS]])  # [1, 1]
    opt = torch.optim.Adam(policy.parameters(), lr=config.lr)

    with torch.no_grad():
        ref_logprobs_all = F.log_softmax(_last_logits(ref, prompt), dim=-1)  # [V]; ref never changes
        p_target = [F.softmax(_last_logits(policy, prompt), dim=-1)[TARGET].item()]
    losses: list[float] = []
    rewards_mean: list[float] = []

    start = time.perf_counter()
    for iteration in range(1, config.iterations + 1):
        # 1. Sample a group from pi_old and remember its log-probs.
        with torch.no_grad():
            old_logits = _last_logits(old, prompt)  # [V]
            samples = torch.multinomial(F.softmax(old_logits, dim=-1), G, replacement=True)  # [G]
            old_logprobs_all = F.log_softmax(old_logits, dim=-1)  # [V]
            old_logprobs = old_logprobs_all[samples]  # [G]
            ref_logprobs = ref_logprobs_all[samples]  # [G]

        # 2. Rewards and group-relative advantages.
        rewards = (samples == TARGET).float()  # [G]
        advantages = (rewards - rewards.mean()) / (rewards.std() + config.adv_eps)  # [G]

        # 3. Clipped surrogate with a k3 KL penalty, a few steps on the same group.
        step_losses = []
        for _ in range(config.inner_steps):
            logprobs = F.log_softmax(_last_logits(policy, prompt), dim=-1)[samples]  # [G]
            logratio = logprobs - old_logprobs
            ratio = torch.exp(logratio)
            unclipped = ratio * advantages
            clipped = torch.clamp(ratio, 1 - config.clip, 1 + config.clip) * advantages
            pg = torch.min(unclipped, clipped)  # pessimistic for either sign of A
            kl = kl_k3(ref_logprobs - logprobs)  # log r = log pi_ref - log pi_theta
            loss = -(pg - config.kl_coef * kl).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step_losses.append(loss.item())

        # 4. pi_old <- pi_theta.
        old.load_state_dict(policy.state_dict())

        with torch.no_grad():
            p = F.softmax(_last_logits(policy, prompt), dim=-1)[TARGET].item()
        p_target.append(p)
        losses.append(sum(step_losses) / len(step_losses))
        rewards_mean.append(rewards.mean().item())
        if callback is not None:
            callback(iteration, p, losses[-1])
    train_seconds = time.perf_counter() - start

    return ToyGRPOResult(
        config=config, p_target=p_target, loss=losses, reward=rewards_mean, train_seconds=train_seconds
    )


def run_toy_grpo(
    config: ToyGRPOConfig | None = None, callback: Callable[[int, float, float], None] | None = None
) -> ToyGRPOResult:
    """Run toy GRPO and return the P("a") and loss curves.

    Args:
        config: hyper-parameters; default ``ToyGRPOConfig()`` (exercise 6's).
        callback: called after each iteration as ``callback(iteration, p_target, loss)`` with
            iteration = 1..config.iterations, for progress bars and streaming.

    Returns:
        A :class:`ToyGRPOResult`. The same config gives the same curves (CPU, same torch version).
        torch's global RNG state and thread count are restored afterwards.
    """
    return run_seeded(config, ToyGRPOConfig, _train, callback, NUM_THREADS)
