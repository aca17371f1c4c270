"""Pure-function losses: DPO variants, GRPO advantages and losses, KL estimators, Bradley-Terry."""

# Curriculum I: SFT, RLOO and PPO pieces (the rest is reached through ``alignlings`` lazily).
from alignlings.losses.ppo import gae, kl_shaped_rewards, ppo_policy_loss, ppo_policy_metrics, ppo_value_loss  # noqa: E402,F401
from alignlings.losses.rloo import rloo_advantages  # noqa: E402,F401
from alignlings.losses.sft import sft_loss  # noqa: E402,F401
