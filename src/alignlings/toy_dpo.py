"""Toy DPO end to end: teach a one-layer GPT-2 to answer <bos> with "a", from preference pairs.

DPO is Direct Preference Optimization (Rafailov et al., "Direct Preference Optimization: Your
Language Model is Secretly a Reward Model", 2023): the policy is trained on pairs (x, y_w, y_l) with

    L = -log sigma(beta * [(log pi_theta(y_w|x) - log pi_ref(y_w|x)) - (log pi_theta(y_l|x) - log pi_ref(y_l|x))])

against a frozen reference pi_ref (the starting policy), with no reward model and no sampling.

The task is the toy GRPO's (``alignlings.toy_grpo``), seen through preferences: vocabulary a..i
(ids 0..8) plus <bos> (id 9, also the end-of-sequence token), the prompt is <bos>, a completion is
one token followed by <eos>. The dataset holds the 9 pairs "a" (chosen) over each other token
(rejected), <eos> included: without that pair the probability pushed off the 8 other letters flows
to the one token no pair mentions, and P("a") peaks at 0.47-0.61 and ends at 0.36-0.59 (measured
with these defaults, seeds 0-4): DPO's known habit of moving mass to responses outside the data.
P("a" | <bos>) starts near 1/10.

Each step (full batch, the 9 pairs):
    1. sequence log-probs: sum over the completion tokens of log pi(y_t | x, y_<t), the logits at
       position t-1 predicting token t (shift by one), the prompt masked out;
    2. the same under pi_ref, without gradient (computed once: the reference never changes);
    3. ``alignlings.dpo_loss`` (sigmoid, beta) and one Adam step.

Unlike the toy GRPO nothing is sampled: the data are fixed, so the seed only sets the
initialisation. Dropout is off (eval mode) so that pi_theta equals pi_ref before the first step.

Importing this module has no side effects; :func:`run_toy_dpo` seeds and restores torch's global
RNG and thread count around the run. Metric names: ``p_target`` = P("a" | <bos>) after each step
(index 0 = before training); ``loss`` = the DPO loss of each step; ``margin`` = TRL's
``rewards/margins`` (beta times the mean log-ratio difference, before the step).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F

from alignlings.losses.dpo import dpo_loss, dpo_metrics
from alignlings.toy_common import TargetCurve, check_counts, check_seed_and_lr, run_seeded
from alignlings.toy_grpo import BOS, TARGET, VOCAB_SIZE, build_toy_policy

#: <bos> doubles as the end-of-sequence token that closes every completion
EOS = BOS
#: torch threads during a run (a 16-wide model: one thread is fastest)
NUM_THREADS = 1


@dataclass
class ToyDPOConfig:
    """Hyper-parameters of the toy run; the defaults are the toy-dpo exercise's."""

    seed: int = 0
    """``torch.manual_seed`` before the policy is built; fixes the initialisation (default 0)."""
    steps: int = 40
    """Optimizer steps, each on the full batch of 9 pairs (default 40)."""
    lr: float = 3e-2
    """Adam learning rate (default 3e-2)."""
    beta: float = 0.1
    """DPO's beta (default 0.1, TRL's ``DPOConfig.beta``)."""

    def __post_init__(self) -> None:
        check_counts(self, "steps")
        check_seed_and_lr(self)
        if not self.beta > 0:
            raise ValueError(f"beta: expected a value > 0, got {self.beta!r}")


@dataclass
class ToyDPOResult(TargetCurve):
    """What a run produced; ``to_dict()`` is JSON-ready."""

    config: ToyDPOConfig
    p_target: list[float]
    """P("a") before training (index 0) and after each step: ``steps + 1`` values."""
    loss: list[float]
    """DPO loss of each step: ``steps`` values."""
    margin: list[float] = field(default_factory=list)
    """``rewards/margins`` of each step (before its update): ``steps`` values."""
    train_seconds: float = 0.0
    """Wall time of the training loop (model building excluded)."""

    @property
    def steps(self) -> int:
        return len(self.loss)

    def to_dict(self) -> dict:
        return {
            "p_target_initial": self.p_target_initial,
            "p_target_final": self.p_target_final,
            "steps": self.steps,
            "train_seconds": self.train_seconds,
            **asdict(self.config),
            "p_target": list(self.p_target),
            "loss": list(self.loss),
            "margin": list(self.margin),
        }


def preference_pairs() -> tuple[torch.Tensor, torch.Tensor]:
    """The dataset: chosen and rejected sequences [9, 3] = <bos> token <eos>; "a" beats every other token."""
    rejected_letters = torch.tensor([t for t in range(VOCAB_SIZE) if t != TARGET])  # [9], <eos> included
    n = rejected_letters.shape[0]
    bos = torch.full((n, 1), BOS)
    eos = torch.full((n, 1), EOS)
    chosen = torch.cat([bos, torch.full((n, 1), TARGET), eos], dim=1)  # [9, 3]
    rejected = torch.cat([bos, rejected_letters.unsqueeze(1), eos], dim=1)  # [9, 3]
    return chosen, rejected


def completion_mask_for(input_ids: torch.Tensor, prompt_length: int = 1) -> torch.Tensor:
    """[B, T] 1 on completion tokens, 0 on the prompt."""
    mask = torch.ones_like(input_ids)
    mask[:, :prompt_length] = 0
    return mask


def sequence_logps(model, input_ids: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """[B] sum over completion tokens of log pi(y_t | y_<t): logits at t-1 score token t."""
    logits = model(input_ids=input_ids, use_cache=False).logits  # [B, T, V]
    logprobs = F.log_softmax(logits[:, :-1], dim=-1)  # [B, T-1, V]; position t-1 predicts token t
    per_token = logprobs.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)  # [B, T-1]
    return (per_token * completion_mask[:, 1:]).sum(-1)  # [B]


def p_target(model) -> float:
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([[BOS]]), use_cache=False).logits[0, -1]  # [V]
        return F.softmax(logits, dim=-1)[TARGET].item()


def _train(config: ToyDPOConfig, callback: Callable[[int, float, float], None] | None) -> ToyDPOResult:
    torch.manual_seed(config.seed)
    policy = build_toy_policy()
    ref = copy.deepcopy(policy).requires_grad_(False)  # frozen pi_ref
    opt = torch.optim.Adam(policy.parameters(), lr=config.lr)
    chosen, rejected = preference_pairs()
    chosen_mask, rejected_mask = completion_mask_for(chosen), completion_mask_for(rejected)

    with torch.no_grad():
        ref_chosen = sequence_logps(ref, chosen, chosen_mask)  # [9]
        ref_rejected = sequence_logps(ref, rejected, rejected_mask)  # [9]
    curve = [p_target(policy)]
    losses: list[float] = []
    margins: list[float] = []

    start = time.perf_counter()
    for step in range(1, config.steps + 1):
        policy_chosen = sequence_logps(policy, chosen, chosen_mask)  # [9]
        policy_rejected = sequence_logps(policy, rejected, rejected_mask)  # [9]
        loss = dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=config.beta)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

        stats = dpo_metrics(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=config.beta)
        curve.append(p_target(policy))
        losses.append(loss.item())
        margins.append(stats["rewards/margins"])
        if callback is not None:
            callback(step, curve[-1], losses[-1])
    train_seconds = time.perf_counter() - start
    return ToyDPOResult(config=config, p_target=curve, loss=losses, margin=margins, train_seconds=train_seconds)


def run_toy_dpo(
    config: ToyDPOConfig | None = None, callback: Callable[[int, float, float], None] | None = None
) -> ToyDPOResult:
    """Run toy DPO and return the P("a") and loss curves.

    Args:
        config: hyper-parameters; default ``ToyDPOConfig()`` (the exercise's).
        callback: called after each step as ``callback(step, p_target, loss)``, step = 1..config.steps.

    Returns:
        A :class:`ToyDPOResult`. The same config gives the same curves (CPU, same torch version).
        torch's global RNG state and thread count are restored afterwards.
    """
    return run_seeded(config, ToyDPOConfig, _train, callback, NUM_THREADS)
