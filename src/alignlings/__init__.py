"""alignlings: a verified reference library for LLM preference alignment and a practice system over it.

The public API is imported lazily so that ``alignlings --help`` and ``alignlings list``
start without importing torch. ``from alignlings import dpo_loss`` works as usual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from alignlings._lazy import lazy_exports

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "dpo_loss": "alignlings.losses.dpo",
    "dpo_implicit_rewards": "alignlings.losses.dpo",
    "dpo_metrics": "alignlings.losses.dpo",
    "DPO_LOSSES": "alignlings.losses.dpo",
    "grpo_advantages": "alignlings.losses.grpo",
    "grpo_loss": "alignlings.losses.grpo",
    "grpo_metrics": "alignlings.losses.grpo",
    "GRPO_AGGREGATIONS": "alignlings.losses.grpo",
    "kl_penalty": "alignlings.losses.kl",
    "KL_ESTIMATORS": "alignlings.losses.kl",
    "bradley_terry_loss": "alignlings.losses.reward",
    "selective_log_softmax": "alignlings.logprobs",
    "sequence_logprobs": "alignlings.logprobs",
    "fused_sequence_logprobs": "alignlings.logprobs",
    "SequenceLogProbs": "alignlings.logprobs",
    "RewardModel": "alignlings.reward_model",
    "check": "alignlings.practice.notebook",
    "kto_loss": "alignlings.losses.kto",
    "kto_metrics": "alignlings.losses.kto",
    "KTO_LOSSES": "alignlings.losses.kto",
    "cpo_loss": "alignlings.losses.cpo",
    "CPO_LOSSES": "alignlings.losses.cpo",
    "orpo_loss": "alignlings.losses.orpo",
    "orpo_metrics": "alignlings.losses.orpo",
    "sft_loss": "alignlings.losses.sft",
    "rloo_advantages": "alignlings.losses.rloo",
    "gae": "alignlings.losses.ppo",
    "kl_shaped_rewards": "alignlings.losses.ppo",
    "ppo_value_loss": "alignlings.losses.ppo",
    "ppo_policy_loss": "alignlings.losses.ppo",
    "ppo_policy_metrics": "alignlings.losses.ppo",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


__getattr__, __dir__ = lazy_exports('alignlings', _EXPORTS, globals())


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from alignlings.logprobs import (SequenceLogProbs, fused_sequence_logprobs, selective_log_softmax,
                                     sequence_logprobs)
    from alignlings.losses.dpo import DPO_LOSSES, dpo_implicit_rewards, dpo_loss, dpo_metrics
    from alignlings.losses.grpo import GRPO_AGGREGATIONS, grpo_advantages, grpo_loss, grpo_metrics
    from alignlings.losses.kl import KL_ESTIMATORS, kl_penalty
    from alignlings.losses.reward import bradley_terry_loss
    from alignlings.practice.notebook import check
    from alignlings.reward_model import RewardModel
    from alignlings.losses.sft import sft_loss
    from alignlings.losses.rloo import rloo_advantages
    from alignlings.losses.ppo import gae, kl_shaped_rewards, ppo_policy_loss, ppo_policy_metrics, ppo_value_loss
    from alignlings.losses.kto import KTO_LOSSES, kto_loss, kto_metrics
    from alignlings.losses.cpo import CPO_LOSSES, cpo_loss
    from alignlings.losses.orpo import orpo_loss, orpo_metrics
