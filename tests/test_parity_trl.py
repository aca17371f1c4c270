"""Layer 2: our losses against TRL 1.16's own code on the same inputs.

Nothing of TRL is re-implemented here. Each TRL method is driven unbound with a stand-in ``self``
(a ``types.SimpleNamespace`` holding exactly the config fields and collaborators it reads) and a
stand-in model, so the numbers and gradients compared are the ones TRL's trainer would produce:

- DPO: ``DPOTrainer._compute_loss``; the stand-in model returns per-token log-probs whose row sums
  are our summed policy log-probs (value in column 0, zeros elsewhere; TRL sums every kept column).
- GRPO loss: ``GRPOTrainer._compute_loss``; the stand-in ``_get_per_token_logps_and_entropies``
  returns our per-token log-probs (a leaf with ``requires_grad``).
- GRPO advantages: ``GRPOTrainer._generate_and_score_completions`` itself, with ``_generate`` and
  ``_calculate_rewards`` stubbed (no model, no tokenizer), so TRL's inline advantage code runs as is.

Everything runs in float64 (TRL allows it on every path used here), so values and gradients must
agree to 1e-6. In practice they agree to ~1e-12, except where TRL drops to float32 on its own:
exo_pair (~3e-8: TRL builds eps as ``torch.tensor(label_smoothing)``, a float32) and the advantages
(~1e-7: TRL's ``nanstd`` gets its Bessel factor ``count / (count - 1)`` from integer tensors, in float32).
"""

from __future__ import annotations

import collections
import itertools
import types

import pytest
import torch

trl_dpo = pytest.importorskip("trl.trainer.dpo_trainer")
trl_grpo = pytest.importorskip("trl.trainer.grpo_trainer")

import alignlings  # noqa: E402
from alignlings import DPO_LOSSES  # noqa: E402

DTYPE = torch.float64
ATOL = 1e-6
SEEDS = (0, 1, 2)


# tiny tensors: a second torch thread costs more than it saves (see conftest.one_torch_thread)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _metrics_store():
    return collections.defaultdict(lambda: collections.defaultdict(list))


def _accelerator():
    """Single-process accelerator: every gather/reduce is the identity."""
    return types.SimpleNamespace(
        device=torch.device("cpu"),
        num_processes=1,
        process_index=0,
        gather=lambda x: x,
        gather_for_metrics=lambda x: x,
        reduce=lambda x, reduction="sum": x,
    )


def _close(ours: torch.Tensor | float, theirs: torch.Tensor | float, what: str) -> None:
    ours = torch.as_tensor(ours, dtype=DTYPE)
    theirs = torch.as_tensor(theirs, dtype=DTYPE)
    torch.testing.assert_close(ours, theirs, rtol=0.0, atol=ATOL, msg=lambda m: f"{what}: {m}")


# ---------------------------------------------------------------------------------------------
# DPO: DPOTrainer._compute_loss
# ---------------------------------------------------------------------------------------------

# label_smoothing values each loss type is driven with (TRL's sigmoid and the others ignore it;
# exo_pair needs eps > 0, robust eps < 0.5).
DPO_SMOOTHING = {name: (0.0, 0.2) for name in DPO_LOSSES}
DPO_SMOOTHING["exo_pair"] = (0.1, 0.3)
DPO_SMOOTHING["robust"] = (0.0, 0.1, 0.3)


def _dpo_case(seed: int, B: int, T: int = 6):
    """Random summed log-probs and a completion mask [2B, T+1] (rows: B chosen, then B rejected)."""
    g = torch.Generator().manual_seed(seed)
    policy_chosen = (-20 + 5 * torch.randn(B, generator=g, dtype=DTYPE)).requires_grad_()
    policy_rejected = (-20 + 5 * torch.randn(B, generator=g, dtype=DTYPE)).requires_grad_()
    ref_chosen = -20 + 5 * torch.randn(B, generator=g, dtype=DTYPE)
    ref_rejected = -20 + 5 * torch.randn(B, generator=g, dtype=DTYPE)
    completion_mask = (torch.rand(2 * B, T + 1, generator=g) < 0.7).long()
    # Column 0 is always a prompt token in a real batch, so it never belongs to the completion; then
    # the row sums of completion_mask (what TRL divides by for ipo/sigmoid_norm) equal those of the
    # shifted mask completion_mask[:, 1:] (which marks the predicted completion tokens).
    completion_mask[:, 0] = 0
    if B > 1:
        completion_mask[1] = 0  # an empty completion: TRL clamps its length to 1
    return policy_chosen, policy_rejected, ref_chosen, ref_rejected, completion_mask


def _trl_dpo(policy_chosen, policy_rejected, ref_chosen, ref_rejected, completion_mask, *,
             beta, loss_types, loss_weights, label_smoothing):
    """Run TRL's DPOTrainer._compute_loss; return (loss, the trainer's metrics dict)."""
    B = policy_chosen.shape[0]
    T = completion_mask.shape[1] - 1
    # Per-token log-probs whose row sums are the policy's summed log-probs (TRL sums every column).
    column0 = torch.cat([policy_chosen, policy_rejected]).unsqueeze(1)  # [2B, 1]
    log_probs = torch.cat([column0, torch.zeros(2 * B, T - 1, dtype=DTYPE)], dim=1)  # [2B, T]

    def model(**kwargs):
        return types.SimpleNamespace(
            log_probs=log_probs,
            entropy=torch.ones(2 * B, T, dtype=DTYPE),
            mean_logits=torch.zeros(2 * B, T, dtype=DTYPE),
            is_top1=torch.zeros(2 * B, T, dtype=torch.bool),
        )

    model.training = True
    this = types.SimpleNamespace(
        model=model,
        accelerator=_accelerator(),
        beta=beta,
        loss_types=loss_types,
        loss_weights=loss_weights,
        label_smoothing=label_smoothing,
        f_divergence_type="reverse_kl",
        f_alpha_divergence_coef=1.0,
        ld_alpha=None,
        precompute_ref_logps=True,
        use_weighting=False,
        aux_loss_enabled=False,
        args=types.SimpleNamespace(discopop_tau=0.05),
        _metrics=_metrics_store(),
        _total_train_tokens=0,
        _tp_size=1,
    )
    inputs = {
        "input_ids": torch.randint(0, 100, (2 * B, T + 1)),
        "attention_mask": torch.ones(2 * B, T + 1, dtype=torch.long),
        "completion_mask": completion_mask,
        "ref_chosen_logps": ref_chosen,
        "ref_rejected_logps": ref_rejected,
    }
    loss = trl_dpo.DPOTrainer._compute_loss(this, model, inputs, return_outputs=False)
    return loss, {k: v[-1] for k, v in this._metrics["train"].items()}


@pytest.mark.parametrize("loss_type", sorted(DPO_LOSSES))
@pytest.mark.parametrize("B", [1, 4, 9])
def test_dpo_loss_and_gradient_match_trl(loss_type, B):
    for seed, beta, eps in itertools.product(SEEDS, (0.1, 0.5), DPO_SMOOTHING[loss_type]):
        pc, pr, rc, rr, completion_mask = _dpo_case(seed, B)
        theirs, _ = _trl_dpo(pc, pr, rc, rr, completion_mask, beta=beta, loss_types=[loss_type],
                             loss_weights=[1.0], label_smoothing=eps)
        g_theirs = torch.autograd.grad(theirs, (pc, pr))

        pc2, pr2 = pc.detach().clone().requires_grad_(), pr.detach().clone().requires_grad_()
        # TRL's ipo / sigmoid_norm divide by the row sums of the (unshifted) completion_mask.
        chosen_len, rejected_len = completion_mask.sum(dim=1).chunk(2)
        ours = alignlings.dpo_loss(pc2, pr2, rc, rr, beta=beta, loss_type=loss_type, label_smoothing=eps,
                                   chosen_lengths=chosen_len, rejected_lengths=rejected_len)
        g_ours = torch.autograd.grad(ours, (pc2, pr2))

        case = f"{loss_type} seed={seed} B={B} beta={beta} eps={eps}"
        _close(ours, theirs, f"loss {case}")
        _close(g_ours[0], g_theirs[0], f"d/d policy_chosen {case}")
        _close(g_ours[1], g_theirs[1], f"d/d policy_rejected {case}")


def test_dpo_length_normalisation_uses_completion_token_counts():
    """ipo's normaliser is the completion length, not the sequence length: dividing by T would differ."""
    pc, pr, rc, rr, completion_mask = _dpo_case(5, 4)
    theirs, _ = _trl_dpo(pc, pr, rc, rr, completion_mask, beta=0.1, loss_types=["ipo"], loss_weights=[1.0],
                         label_smoothing=0.0)
    full = torch.full((4,), float(completion_mask.shape[1]), dtype=DTYPE)
    wrong = alignlings.dpo_loss(pc, pr, rc, rr, beta=0.1, loss_type="ipo", chosen_lengths=full, rejected_lengths=full)
    assert abs(wrong.item() - theirs.item()) > 1e-3


def test_dpo_weighted_mixture_matches_trl():
    """TRL sums weighted loss types (loss_type=[...], loss_weights=[...]); a sum of our losses equals it."""
    types_, weights = ["sigmoid", "bco_pair", "ipo"], [0.8, 0.2, 0.05]
    for seed in SEEDS:
        pc, pr, rc, rr, completion_mask = _dpo_case(seed, 6)
        theirs, _ = _trl_dpo(pc, pr, rc, rr, completion_mask, beta=0.1, loss_types=types_, loss_weights=weights,
                             label_smoothing=0.0)
        chosen_len, rejected_len = completion_mask.sum(dim=1).chunk(2)
        ours = sum(
            w * alignlings.dpo_loss(pc, pr, rc, rr, beta=0.1, loss_type=t,
                                    chosen_lengths=chosen_len, rejected_lengths=rejected_len)
            for t, w in zip(types_, weights)
        )
        _close(ours, theirs, f"mixture seed={seed}")
        _close(torch.autograd.grad(ours, pc)[0], torch.autograd.grad(theirs, pc)[0], f"mixture grad seed={seed}")


@pytest.mark.parametrize("B", [1, 4, 9])
def test_dpo_metrics_match_trl(B):
    for seed, beta in itertools.product(SEEDS, (0.1, 0.5)):
        pc, pr, rc, rr, completion_mask = _dpo_case(seed, B)
        if seed == 0:
            pr = (pc.detach() - rc + rr).requires_grad_()  # ties: accuracy counts strict > only
        _, theirs = _trl_dpo(pc, pr, rc, rr, completion_mask, beta=beta, loss_types=["sigmoid"],
                             loss_weights=[1.0], label_smoothing=0.0)
        ours = alignlings.dpo_metrics(pc, pr, rc, rr, beta=beta)
        for key in ("rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies",
                    "logps/chosen", "logps/rejected"):
            assert ours[key] == pytest.approx(theirs[key], abs=ATOL), (key, seed, B, beta)


# ---------------------------------------------------------------------------------------------
# GRPO loss: GRPOTrainer._compute_loss
# ---------------------------------------------------------------------------------------------


def _grpo_case(seed: int, B: int, T: int, *, with_old: bool):
    g = torch.Generator().manual_seed(seed)
    logps = (-2.0 * torch.rand(B, T, generator=g, dtype=DTYPE)).requires_grad_()
    # old and ref near logps, so ratios land on both sides of the clip range (1 +- 0.2)
    old = (logps.detach() + 0.3 * torch.randn(B, T, generator=g, dtype=DTYPE)) if with_old else None
    ref = logps.detach() + 0.5 * torch.randn(B, T, generator=g, dtype=DTYPE)
    advantages = torch.randn(B, generator=g, dtype=DTYPE)
    mask = (torch.rand(B, T, generator=g) < 0.6).long()
    mask[torch.arange(B), torch.randint(0, T, (B,), generator=g)] = 1  # every row has a token
    return logps, old, ref, advantages, mask


def _trl_grpo(logps, old, ref, advantages, mask, *, loss_type, beta, epsilon, epsilon_high, delta,
              importance_sampling_level, use_bias_correction_kl, max_completion_length, num_items_in_batch):
    """Run TRL's GRPOTrainer._compute_loss; return (loss, the trainer's metrics dict)."""
    B, T = logps.shape
    entropies = torch.rand(B, T, dtype=DTYPE)

    def get_logps(model, input_ids, attention_mask, logits_to_keep, **kwargs):
        assert logits_to_keep == T
        return logps, entropies, None

    model = types.SimpleNamespace(training=True)
    this = types.SimpleNamespace(
        model=model,
        accelerator=_accelerator(),
        _get_per_token_logps_and_entropies=get_logps,
        loss_type=loss_type,
        beta=beta,
        epsilon_low=epsilon,
        epsilon_high=epsilon if epsilon_high is None else epsilon_high,  # TRL's __init__ default
        importance_sampling_level=importance_sampling_level,
        top_entropy_quantile=1.0,
        off_policy_mask_threshold=None,
        use_vllm=False,
        aux_loss_enabled=False,
        _entropy_bonus_enabled=False,
        current_gradient_accumulation_steps=1,
        max_completion_length=max_completion_length,
        args=types.SimpleNamespace(use_bias_correction_kl=use_bias_correction_kl, delta=delta,
                                   steps_per_generation=1),
        _metrics=_metrics_store(),
    )
    inputs = {
        "prompt_ids": torch.ones(B, 2, dtype=torch.long),
        "prompt_mask": torch.ones(B, 2, dtype=torch.long),
        "completion_ids": torch.ones(B, T, dtype=torch.long),
        "completion_mask": mask,
        "advantages": advantages,
        "num_items_in_batch": torch.tensor(num_items_in_batch),
    }
    if old is not None:
        inputs["old_per_token_logps"] = old
    if beta != 0.0:
        inputs["ref_per_token_logps"] = ref
    loss = trl_grpo.GRPOTrainer._compute_loss(this, model, inputs)
    return loss, {k: v[-1] for k, v in this._metrics["train"].items()}


GRPO_GRID = list(itertools.product(
    ("grpo", "bnpo", "dr_grpo", "dapo"),  # loss_type
    ("token", "sequence"),  # importance_sampling_level
    (0.0, 0.04),  # beta
    (True, False),  # use_bias_correction_kl
))


@pytest.mark.parametrize("loss_type,level,beta,bias_kl", GRPO_GRID)
def test_grpo_loss_gradient_and_metrics_match_trl(loss_type, level, beta, bias_kl):
    for seed, (B, T), eps_high, delta, with_old in itertools.product(
        SEEDS[:2], ((1, 4), (6, 7)), (None, 0.28), (None, 1.5), (False, True)
    ):
        logps, old, ref, advantages, mask = _grpo_case(seed, B, T, with_old=with_old)
        num_items = int(mask.sum()) + 5  # the global batch holds more tokens than this micro-batch
        kwargs = dict(loss_type=loss_type, beta=beta, epsilon=0.2, epsilon_high=eps_high, delta=delta,
                      importance_sampling_level=level, use_bias_correction_kl=bias_kl, max_completion_length=T + 2)
        theirs, metrics = _trl_grpo(logps, old, ref, advantages, mask, num_items_in_batch=num_items, **kwargs)
        g_theirs = torch.autograd.grad(theirs, logps)[0]

        logps2 = logps.detach().clone().requires_grad_()
        ours = alignlings.grpo_loss(logps2, old, ref, advantages, mask, num_items_in_batch=num_items, **kwargs)
        g_ours = torch.autograd.grad(ours, logps2)[0]

        case = f"{kwargs} seed={seed} B={B} T={T} old={with_old}"
        _close(ours, theirs, f"loss {case}")
        _close(g_ours, g_theirs, f"grad {case}")

        # Metrics. TRL's clip ratios use the ratio after the delta cap; with delta = 1.5 > 1 + eps_high the
        # high-clip test (ratio > 1 + eps_high) reads the same either way, so they correspond here.
        ref_for_metrics = ref if beta != 0.0 else None
        ours_m = alignlings.grpo_metrics(logps2, old, ref_for_metrics, advantages, mask, epsilon=0.2,
                                         epsilon_high=eps_high, importance_sampling_level=level)
        for key in ("clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean"):
            assert ours_m[key] == pytest.approx(metrics[key], abs=ATOL), (key, case)
        # TRL logs the KL term as it enters the loss (times the ratio under use_bias_correction_kl);
        # ours logs plain k3. They correspond when the correction is off or the ratio is 1 (on-policy).
        if beta != 0.0 and (not bias_kl or old is None):
            assert ours_m["kl"] == pytest.approx(metrics["kl"], abs=ATOL), ("kl", case)


def test_grpo_per_token_advantages_match_trl():
    """Advantages of shape [B, T] (subclasses of TRL pass them) go through unchanged."""
    logps, old, ref, _, mask = _grpo_case(3, 5, 6, with_old=True)
    adv = torch.randn(5, 6, dtype=DTYPE)
    for loss_type, level in itertools.product(("grpo", "bnpo", "dapo"), ("token", "sequence")):
        kwargs = dict(loss_type=loss_type, beta=0.04, epsilon=0.2, epsilon_high=None, delta=None,
                      importance_sampling_level=level, use_bias_correction_kl=True, max_completion_length=8)
        theirs, _ = _trl_grpo(logps, old, ref, adv, mask, num_items_in_batch=int(mask.sum()), **kwargs)
        ours = alignlings.grpo_loss(logps, old, ref, adv, mask, num_items_in_batch=int(mask.sum()), **kwargs)
        _close(ours, theirs, f"{loss_type} {level}")
        _close(torch.autograd.grad(ours, logps)[0], torch.autograd.grad(theirs, logps)[0], f"{loss_type} {level}")


# ---------------------------------------------------------------------------------------------
# GRPO advantages: GRPOTrainer._generate_and_score_completions
# ---------------------------------------------------------------------------------------------
# TRL 1.16 has no standalone advantage function: the computation is inline in
# _generate_and_score_completions. That method turned out to be drivable: with no environments,
# tools, images, vLLM or reference model, all it needs from `self` is the namespace below, with
# `_generate` returning token-id lists and `_calculate_rewards` returning our reward matrix [P*G, K].
# So TRL's own advantage code (nansum of weighted rewards, nanmean/nanstd per group or batch,
# + 1e-4, unscorable rows) runs unmodified.


def _trl_advantages(rewards_per_func: torch.Tensor, *, num_generations: int, scale_rewards: str,
                    reward_weights: torch.Tensor):
    n, K = rewards_per_func.shape

    def generate(prompts):
        m = len(prompts)
        # prompt ids, completion ids, tool mask, completions, sampling logps, extra fields, images, tool images
        return [[1, 2]] * m, [[3, 4, 5]] * m, None, ["c"] * m, None, {}, None, None

    this = types.SimpleNamespace(
        accelerator=_accelerator(),
        model=types.SimpleNamespace(training=True, is_gradient_checkpointing=False),
        args=types.SimpleNamespace(per_device_train_batch_size=n, steps_per_generation=1,
                                   gradient_accumulation_steps=1, gradient_checkpointing_kwargs=None),
        environment_factories=None,
        tools=None,
        environments=None,
        _generate=generate,
        _calculate_rewards=lambda inputs, prompts, completions, completion_ids: rewards_per_func,
        _tokenizer=types.SimpleNamespace(pad_token_id=0),
        pad_to_multiple_of=None,
        mask_truncated_completions=False,
        num_iterations=1,
        use_vllm=False,
        beta=0.0,
        num_generations=num_generations,
        multi_objective_aggregation="sum_then_normalize",  # TRL's default
        scale_rewards=scale_rewards,
        reward_weights=reward_weights,
        reward_func_names=[f"f{k}" for k in range(K)],
        _metrics=_metrics_store(),
        _logs={"prompt": [], "completion": [], "rewards": collections.defaultdict(list), "advantages": [],
               "extra": collections.defaultdict(list)},
        _pending_extra_logs={},
        _pending_metrics={},
        log_multimodal=False,
    )
    out = trl_grpo.GRPOTrainer._generate_and_score_completions(this, [{"prompt": "p"}] * n)
    return out["advantages"]


@pytest.mark.parametrize("scale_rewards", ["group", "batch", "none"])
@pytest.mark.parametrize("P,G,K", [(1, 8, 1), (3, 4, 2), (2, 16, 3)])
def test_grpo_advantages_match_trl(scale_rewards, P, G, K):
    for seed in SEEDS:
        g = torch.Generator().manual_seed(seed)
        rewards = torch.rand(P, G, K, generator=g, dtype=DTYPE)
        if seed == 1:
            rewards = (rewards > 0.7).to(DTYPE)  # 0/1 pass/fail rewards
        if seed == 2:
            rewards[0] = 0.5  # a flat group (zero std)
        weights = torch.rand(K, generator=g, dtype=DTYPE) + 0.5
        theirs = _trl_advantages(rewards.reshape(P * G, K), num_generations=G, scale_rewards=scale_rewards,
                                 reward_weights=weights)
        ours = alignlings.grpo_advantages(rewards, scale_rewards=scale_rewards, reward_weights=weights)
        _close(ours.reshape(-1), theirs, f"advantages {scale_rewards} P={P} G={G} K={K} seed={seed}")
        if K == 1:  # a [P, G] reward matrix means one reward function of weight 1
            theirs_1 = _trl_advantages(rewards.reshape(P * G, 1), num_generations=G, scale_rewards=scale_rewards,
                                       reward_weights=torch.ones(1, dtype=DTYPE))
            ours_1 = alignlings.grpo_advantages(rewards[..., 0], scale_rewards=scale_rewards)
            _close(ours_1.reshape(-1), theirs_1, f"advantages [P, G] {scale_rewards} seed={seed}")


@pytest.mark.parametrize("scale_rewards", ["group", "batch", "none"])
def test_grpo_advantages_with_unscored_rewards_match_trl(scale_rewards):
    """A reward function may return None (NaN) for a completion it does not score. When some function
    scored it, NaN counts as 0 (nansum); when none did, TRL leaves the row out of the baseline and std
    and gives it advantage 0."""
    P, G, K = 3, 6, 2
    rewards = torch.rand(P, G, K, generator=torch.Generator().manual_seed(7), dtype=DTYPE)
    rewards[0, 1, 0] = float("nan")  # partly scored
    rewards[1, 2, :] = float("nan")  # unscorable
    rewards[2, :, 1] = float("nan")  # function 1 does not apply to this prompt
    rewards[2, 0, :] = float("nan")
    weights = torch.tensor([1.0, 0.5], dtype=DTYPE)
    theirs = _trl_advantages(rewards.reshape(P * G, K), num_generations=G, scale_rewards=scale_rewards,
                             reward_weights=weights)
    ours = alignlings.grpo_advantages(rewards, scale_rewards=scale_rewards, reward_weights=weights)
    _close(ours.reshape(-1), theirs, f"advantages with NaN, {scale_rewards}")
