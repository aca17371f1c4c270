"""Toy PPO end to end: a one-layer GPT-2 learns to answer <bos> with "aaaa", token by token, with a critic.

PPO for language models (Schulman et al., "Proximal Policy Optimization Algorithms", 2017; the RLHF
form of Ziegler et al., 2019 and Ouyang et al., 2022; the implementation details of Huang et al.,
"The N+ Implementation Details of RLHF with PPO", 2024) in one file, each piece a small pure function
in the order the pack teaches them:

1. ``token_logprobs``: log pi(y_t | y_<t) of the sampled tokens, logits at position t predicting t + 1
   (exercise ``token-logprobs``);
2. ``kl_shaped_rewards``: -kl_coef * (log pi - log pi_ref) on every response token (k1, which gives
   the KL gradient in expectation) and the score on the last real token (``ppo-value-and-kl``);
3. ``gae``: delta_t = r_t + gamma V_{t+1} - V_t, A_t = delta_t + gamma lam A_{t+1}, returns = A + V
   (``gae``);
4. ``clipped_policy_loss``: -min(rho A, clip(rho, 1 - c, 1 + c) A), masked token mean (``ppo-clip``);
5. ``clipped_value_loss``: 0.5 max((V - R)^2, (clip(V, V_old - c, V_old + c) - R)^2) (``ppo-value-and-kl``).

The task: vocabulary a..i (ids 0..8) and <bos> (id 9), which also ends a response (EOS). A response
has at most ``RESPONSE_LENGTH`` = 4 tokens; after an EOS the rest is padding (mask 0). The score is the
number of "a" in the response divided by 4, so "aaaa" scores 1 and the mean score of a random policy is
about 0.1. The critic is a second one-layer GPT-2 body with a scalar head (TRL's PPO used a separate
value model too). Each iteration samples ``batch_size`` responses, computes the rewards, advantages and
returns once, then runs ``ppo_epochs`` full-batch Adam steps on policy loss + vf_coef * value loss.

Importing this module has no side effects; :func:`run_toy_ppo` seeds and restores torch's global RNG
and thread count around the run. Metric names (one value per iteration, logged after its updates):
``score`` = mean score of the sampled batch (before the update); ``p_target`` = P("aaaa" | <bos>)
under the policy, exactly (index 0 = before training); ``kl`` = mean k1 log pi - log pi_ref over the
sampled response tokens; ``clipfrac`` = fraction of response tokens whose ratio was clipped in the last
epoch; ``value_loss`` and ``policy_loss`` = the two losses of the last epoch; ``value`` = the critic's mean
prediction V_old over the response tokens at the rollout and ``lambda_return`` = the mean lambda-return A + V_old over the same
tokens (A before whitening), what the critic should learn: a critic that learns it has the two close.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch

from alignlings.toy_common import TargetCurve, check_counts, check_seed_and_lr, run_seeded

#: vocabulary: letters a..i are ids 0..8, <bos> (id 9) also ends a response
VOCAB_SIZE = 10
TARGET = 0  # "a"
BOS = EOS = 9
#: the longest response, in tokens
RESPONSE_LENGTH = 4
#: torch threads during a run; 1 is fastest for a 16-wide model
NUM_THREADS = 1


@dataclass
class ToyPPOConfig:
    """Hyper-parameters of the toy run; the defaults are the capstone exercise's."""

    seed: int = 0
    """``torch.manual_seed`` before the models are built; fixes initialisation and sampling (default 0)."""
    iterations: int = 40
    """Sample-then-update rounds (default 40)."""
    batch_size: int = 64
    """Responses sampled per round (default 64)."""
    ppo_epochs: int = 4
    """Full-batch optimizer steps per sampled batch (default 4; TRL's PPO ``num_ppo_epochs``)."""
    lr: float = 1e-2
    """Adam learning rate for the policy and the critic (default 1e-2)."""
    clip_range: float = 0.2
    """c of the ratio clip [1 - c, 1 + c] (default 0.2, TRL's PPO ``cliprange``)."""
    clip_range_value: float = 0.2
    """c of the value clip [V_old - c, V_old + c] (default 0.2, TRL's PPO ``cliprange_value``)."""
    vf_coef: float = 0.5
    """Weight of the value loss in the total loss (default 0.5, CleanRL's; TRL's PPO used 0.1)."""
    kl_coef: float = 0.05
    """Weight of the per-token k1 penalty in the reward (default 0.05, TRL's PPO ``kl_coef``)."""
    gamma: float = 1.0
    """Discount (default 1.0, TRL's PPO)."""
    lam: float = 0.95
    """GAE's lambda (default 0.95, TRL's PPO)."""
    whiten_advantages: bool = True
    """Whiten the advantages over the batch's response tokens before the updates (default True, as TRL's PPO)."""

    def __post_init__(self) -> None:
        check_counts(self, "iterations", "batch_size", "ppo_epochs")
        check_seed_and_lr(self)
        for name in ("clip_range", "clip_range_value", "vf_coef", "kl_coef"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name}: expected a value >= 0, got {getattr(self, name)!r}")
        for name in ("gamma", "lam"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name}: expected a value in [0, 1], got {getattr(self, name)!r}")


@dataclass
class ToyPPOResult(TargetCurve):
    """What a run produced; ``to_dict()`` is JSON-ready."""

    config: ToyPPOConfig
    p_target: list[float]
    """P("aaaa" | <bos>) before training (index 0) and after each iteration: ``iterations + 1`` values."""
    score: list[float] = field(default_factory=list)
    """Mean score of each sampled batch (the fraction of "a" over 4 positions): ``iterations`` values."""
    kl: list[float] = field(default_factory=list)
    """Mean k1 estimate log pi - log pi_ref over the sampled response tokens, per iteration."""
    clipfrac: list[float] = field(default_factory=list)
    """Fraction of response tokens whose ratio the clip switched off, last epoch of each iteration."""
    policy_loss: list[float] = field(default_factory=list)
    value_loss: list[float] = field(default_factory=list)
    value: list[float] = field(default_factory=list)
    """The critic's mean prediction V_old over the sampled response tokens, per iteration (at the rollout)."""
    lambda_return: list[float] = field(default_factory=list)
    """Mean lambda-return A + V_old over the same tokens (A before whitening), per iteration."""
    train_seconds: float = 0.0
    """Wall time of the training loop (model building excluded)."""

    @property
    def iterations(self) -> int:
        return len(self.score)

    @property
    def score_final(self) -> float:
        """Mean score of the last five sampled batches (one batch is noisy)."""
        tail = self.score[-5:]
        return sum(tail) / len(tail)

    def to_dict(self) -> dict:
        return {
            "p_target_initial": self.p_target_initial,
            "p_target_final": self.p_target_final,
            "score_final": self.score_final,
            "iterations": self.iterations,
            "train_seconds": self.train_seconds,
            **asdict(self.config),
            "p_target": list(self.p_target),
            "score": list(self.score),
            "kl": list(self.kl),
            "clipfrac": list(self.clipfrac),
            "policy_loss": list(self.policy_loss),
            "value_loss": list(self.value_loss),
            "value": list(self.value),
            "lambda_return": list(self.lambda_return),
        }


# -- the five pieces --------------------------------------------------------------------------------
def token_logprobs(logits: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """[B, T+1, V] logits of the whole sequence and [B, T+1] ids -> [B, T] log-probs of ids[:, 1:]."""
    logps = torch.log_softmax(logits[:, :-1], dim=-1)  # position t predicts token t + 1
    return logps.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)


def kl_shaped_rewards(scores: torch.Tensor, logps: torch.Tensor, ref_logps: torch.Tensor, mask: torch.Tensor,
                      kl_coef: float) -> torch.Tensor:
    """[B, T] rewards: -kl_coef * k1 on every real token, plus each row's score on its last real token."""
    rewards = -kl_coef * (logps - ref_logps) * mask
    positions = torch.arange(mask.shape[1]).expand_as(mask)
    last = torch.where(mask > 0, positions, -1).max(dim=1).values  # [B]; every row has >= 1 real token
    return rewards.index_put((torch.arange(len(scores)), last), scores, accumulate=True)


def gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float,
        lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns [B, T] for right-padded rows; nothing is bootstrapped past the last real token."""
    values = values * mask  # a padded position's value is what the head says there: not a state
    next_value = torch.zeros_like(values[:, 0])
    last_gae = torch.zeros_like(values[:, 0])
    reversed_advantages = []
    for t in reversed(range(rewards.shape[1])):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        last_gae = (delta + gamma * lam * last_gae) * mask[:, t]
        next_value = values[:, t]
        reversed_advantages.append(last_gae)
    advantages = torch.stack(reversed_advantages[::-1], dim=1)  # [B, T]
    return advantages, (advantages + values) * mask


def clipped_policy_loss(logps: torch.Tensor, old_logps: torch.Tensor, advantages: torch.Tensor,
                        mask: torch.Tensor, clip_range: float) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped surrogate as a masked token mean, and the clip fraction (no gradient)."""
    ratio = torch.exp(logps - old_logps)  # [B, T]
    pg_losses = -advantages * ratio
    pg_losses_clipped = -advantages * torch.clamp(ratio, 1 - clip_range, 1 + clip_range)
    loss = (torch.max(pg_losses, pg_losses_clipped) * mask).sum() / mask.sum()
    with torch.no_grad():
        clipfrac = ((pg_losses_clipped > pg_losses).float() * mask).sum() / mask.sum()
    return loss, clipfrac


def clipped_value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor,
                       mask: torch.Tensor, clip_range_value: float) -> torch.Tensor:
    """0.5 * masked mean of max((V - R)^2, (clip(V, V_old - c, V_old + c) - R)^2)."""
    values_clipped = torch.clamp(values, old_values - clip_range_value, old_values + clip_range_value)
    loss = torch.max((values - returns) ** 2, (values_clipped - returns) ** 2)
    return 0.5 * (loss * mask).sum() / mask.sum()


# -- the models and the rollout ---------------------------------------------------------------------
def toy_gpt2_config():
    """GPT2Config(vocab_size=10, n_positions=5, n_embd=16, n_layer=1, n_head=2): toy GRPO's model with room
    for a 4-token response."""
    from alignlings.toy_grpo import toy_gpt2_config as grpo_config

    return grpo_config(n_positions=1 + RESPONSE_LENGTH)


class Critic(torch.nn.Module):
    """A GPT-2 body with a scalar head: V(s_t) for the prefix ending at each position."""

    def __init__(self, config) -> None:
        super().__init__()
        from transformers import GPT2Model

        self.body = GPT2Model(config)
        self.head = torch.nn.Linear(config.n_embd, 1)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        hidden = self.body(input_ids=input_ids, use_cache=False).last_hidden_state  # [B, T+1, H]
        return self.head(hidden).squeeze(-1)  # [B, T+1]


def build_toy_models():
    """(policy, reference, critic), freshly initialised, dropout off (eval mode); the reference is a frozen
    copy of the policy."""
    import copy

    from transformers import GPT2LMHeadModel

    config = toy_gpt2_config()
    policy = GPT2LMHeadModel(config).eval()
    ref = copy.deepcopy(policy).requires_grad_(False)
    critic = Critic(config).eval()
    return policy, ref, critic


@torch.no_grad()
def sample_responses(policy, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[B, 1 + RESPONSE_LENGTH] ids (<bos> then the response) and the [B, RESPONSE_LENGTH] response mask:
    1 up to and including the first EOS, 0 after it."""
    ids = torch.full((batch_size, 1), BOS)
    for _ in range(RESPONSE_LENGTH):
        logits = policy(input_ids=ids, use_cache=False).logits[:, -1]  # [B, V]
        ids = torch.cat([ids, torch.multinomial(logits.softmax(-1), 1)], dim=1)
    response = ids[:, 1:]
    ended_before = (response == EOS).long().cumsum(-1) - (response == EOS).long()  # EOSes strictly before t
    mask = (ended_before == 0).float()
    return ids, mask


def scores_of(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[B] the number of "a" among the real response tokens, over RESPONSE_LENGTH."""
    return ((ids[:, 1:] == TARGET).float() * mask).sum(-1) / RESPONSE_LENGTH


@torch.no_grad()
def p_all_target(policy) -> float:
    """P("aaaa" | <bos>) under the policy, exactly: the product of P("a" | <bos> a..a) over the 4 steps."""
    ids = torch.tensor([[BOS] + [TARGET] * RESPONSE_LENGTH])
    return token_logprobs(policy(input_ids=ids, use_cache=False).logits, ids).sum().exp().item()


def _train(config: ToyPPOConfig, callback: Callable[[int, dict], None] | None) -> ToyPPOResult:
    torch.manual_seed(config.seed)
    policy, ref, critic = build_toy_models()
    params = list(policy.parameters()) + list(critic.parameters())
    opt = torch.optim.Adam(params, lr=config.lr)
    result = ToyPPOResult(config=config, p_target=[p_all_target(policy)])

    start = time.perf_counter()
    for iteration in range(1, config.iterations + 1):
        # rollout: sample, then score every piece once with the weights that sampled
        ids, mask = sample_responses(policy, config.batch_size)
        with torch.no_grad():
            old_logps = token_logprobs(policy(input_ids=ids, use_cache=False).logits, ids)  # [B, T]
            ref_logps = token_logprobs(ref(input_ids=ids, use_cache=False).logits, ids)
            old_values = critic(ids)[:, :-1] * mask  # V of the prefix before each response token
            scores = scores_of(ids, mask)
            rewards = kl_shaped_rewards(scores, old_logps, ref_logps, mask, config.kl_coef)
            advantages, returns = gae(rewards, old_values, mask, config.gamma, config.lam)
            lambda_return = ((advantages + old_values) * mask).sum().item() / mask.sum().item()
            if config.whiten_advantages:
                mean = (advantages * mask).sum() / mask.sum()
                var = (((advantages - mean) * mask) ** 2).sum() / mask.sum()
                advantages = (advantages - mean) / (var.sqrt() + 1e-8) * mask

        for _ in range(config.ppo_epochs):
            logps = token_logprobs(policy(input_ids=ids, use_cache=False).logits, ids)
            policy_loss, clipfrac = clipped_policy_loss(logps, old_logps, advantages, mask, config.clip_range)
            values = critic(ids)[:, :-1]
            value_loss = clipped_value_loss(values, old_values, returns, mask, config.clip_range_value)
            loss = policy_loss + config.vf_coef * value_loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        result.p_target.append(p_all_target(policy))
        result.score.append(scores.mean().item())
        result.kl.append(((old_logps - ref_logps) * mask).sum().item() / mask.sum().item())
        result.clipfrac.append(clipfrac.item())
        result.policy_loss.append(policy_loss.item())
        result.value_loss.append(value_loss.item())
        result.value.append(old_values.sum().item() / mask.sum().item())  # old_values is 0 on padding
        result.lambda_return.append(lambda_return)
        if callback is not None:
            callback(iteration, {k: getattr(result, k)[-1] for k in
                                 ("p_target", "score", "kl", "clipfrac", "policy_loss", "value_loss",
                                  "value", "lambda_return")})
    result.train_seconds = time.perf_counter() - start
    return result


def run_toy_ppo(config: ToyPPOConfig | None = None,
                callback: Callable[[int, dict], None] | None = None) -> ToyPPOResult:
    """Run toy PPO and return its curves.

    Args:
        config: hyper-parameters; default ``ToyPPOConfig()`` (the capstone exercise's).
        callback: called after each iteration as ``callback(iteration, metrics)`` with iteration =
            1..config.iterations and ``metrics`` a dict of that iteration's ``p_target``, ``score``,
            ``kl``, ``clipfrac``, ``policy_loss``, ``value_loss``, ``value`` and ``lambda_return``, for progress bars and live charts.

    Returns:
        A :class:`ToyPPOResult`. The same config gives the same curves (CPU, same torch version).
        torch's global RNG state and thread count are restored afterwards.
    """
    return run_seeded(config, ToyPPOConfig, _train, callback, NUM_THREADS)
