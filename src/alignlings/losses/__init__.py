"""Pure-function losses: DPO variants, GRPO advantages and losses, KL estimators, Bradley-Terry."""
