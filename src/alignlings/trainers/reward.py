"""RewardTrainer: a scalar reward model trained on preference pairs with the Bradley-Terry loss.

Ouyang et al., "Training language models to follow instructions with human feedback" (2022),
section 3.5; Bradley & Terry (1952). Each step, for a batch of ``prompt/chosen/rejected`` rows
(and an optional ``margin`` column, Llama 2's margin loss):

    score  one forward pass over [prompt+chosen rows; prompt+rejected rows]; the reward of a row is
           the value head on the hidden state of its last real token (``alignlings.RewardModel``);
    loss   ``alignlings.losses.reward.bradley_terry_loss`` = -log sigma(r_c - r_r - margin),
           plus ``center_rewards_coefficient * mean((r_c + r_r)^2)`` when set;
    step   gradient accumulation, clipping and AdamW in ``BaseTrainer``;
    log    TRL's keys: ``accuracy`` (r_c > r_r), ``margin`` (mean r_c - r_r), ``min_reward``,
           ``mean_reward``, ``max_reward``, ``num_tokens``, and ``loss``, ``grad_norm``, ``learning_rate``.

The model may be a ``RewardModel``, a ``*ForSequenceClassification`` model with one label, or a
causal LM, which is wrapped as ``RewardModel(model, freeze_backbone=False)`` (the whole network
trains, as in TRL).
"""

from __future__ import annotations

import torch

from alignlings.losses.reward import bradley_terry_loss
from alignlings.reward_model import RewardModel
from alignlings.trainers.base import BaseTrainer
from alignlings.trainers.checkpoint import set_seed
from alignlings.trainers.configs import RewardConfig
from alignlings.trainers.data import (
    check_columns, collate_completions, load_rows, pad_token_id, tokenize_pair, tokenize_preference,
)
from alignlings.trainers.distributed import unwrap
from alignlings.trainers.modeling import prepare_model


def as_reward_model(model: torch.nn.Module) -> torch.nn.Module:
    """A module mapping (input_ids, attention_mask) to [B] rewards, or a sequence classifier.

    A causal LM is wrapped in a ``RewardModel`` whose head is TRL's: the score head of
    ``AutoModelForSequenceClassification`` is ``Linear(H, 1, bias=False)`` drawn from
    N(0, ``config.initializer_range``) (transformers' ``_init_weights``), so rewards start near 0."""
    if isinstance(model, RewardModel) or type(model).__name__.endswith("ForSequenceClassification"):
        return model
    wrapped = RewardModel(model, freeze_backbone=False)
    head = torch.nn.Linear(wrapped.hidden_dim, 1, bias=False)
    std = getattr(getattr(model, "config", None), "initializer_range", 0.02)
    torch.nn.init.normal_(head.weight, mean=0.0, std=std)
    wrapped.value_head = head.to(next(model.parameters()).dtype)
    return wrapped


def rewards_of(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """[B] rewards from a (possibly DDP-wrapped) reward model or sequence classifier."""
    if isinstance(unwrap(model), RewardModel):
        return model(input_ids, attention_mask)
    return model(input_ids=input_ids, attention_mask=attention_mask).logits.squeeze(-1)


class RewardTrainer(BaseTrainer):
    """Train a reward model on preference pairs.

    Args:
        model: a ``RewardModel``, a sequence classifier with ``num_labels=1``, or a causal LM
            (wrapped in a ``RewardModel`` whose value head is initialised from ``args.seed``).
        args: a ``RewardConfig``.
        train_dataset: rows with ``prompt``, ``chosen``, ``rejected`` (optionally ``margin``).
        processing_class: the tokenizer.
        peft_config: a ``peft.PeftConfig``: adapters on the network (a causal LM's backbone); the
            reward head of a wrapped causal LM always trains (TRL asks for ``modules_to_save=["score"]``
            to get the same).
    """

    name = "reward"
    progress_keys = ("loss", "accuracy", "margin")
    find_unused_parameters = True  # a causal LM backbone's untied LM head gets no gradient

    def __init__(self, model, args: RewardConfig | None = None, train_dataset=None, processing_class=None,
                 peft_config=None) -> None:
        args = args or RewardConfig()
        dataset = load_rows(train_dataset)
        check_columns(dataset, ("prompt", "chosen", "rejected"), "RewardTrainer")
        set_seed(args.seed)  # the value head's initialisation
        if isinstance(model, RewardModel):
            model.backbone = prepare_model(model.backbone, args, peft_config)
        else:
            model = prepare_model(model, args, peft_config)
        super().__init__(as_reward_model(model), args, dataset, processing_class)
        self.pad_id = pad_token_id(processing_class)
        self.rows = [r for r in (self._tokenize(row) for row in dataset) if r is not None]
        if not self.rows:
            raise ValueError(
                f"train_dataset: every pair has a side longer than max_length = {args.max_length} tokens "
                "(such pairs are dropped, as TRL does)"
            )
        self._setup_optimizer(args.per_device_train_batch_size * args.gradient_accumulation_steps, len(self.rows))

    # -- setup -------------------------------------------------------------------------------------

    def _tokenize(self, row: dict) -> dict | None:
        """The two sequences prompt + chosen and prompt + rejected, each tokenized whole (TRL 1.16's
        ``tokenize_fn``); None when either is longer than ``max_length``: TRL drops such a pair rather
        than cut it (a cut row would lose its EOS and its reward would be read mid-answer)."""
        prompt, chosen, rejected = tokenize_preference(self.tokenizer, row["prompt"], row["chosen"], row["rejected"])
        max_len = self.args.max_length
        if max_len is not None and len(prompt) + max(len(chosen), len(rejected)) > max_len:
            return None
        return {"prompt_chosen": prompt, "chosen": chosen, "prompt_rejected": prompt, "rejected": rejected,
                "margin": float(row["margin"]) if "margin" in row else None}

    def collate(self, indices: list[int]) -> dict[str, torch.Tensor]:
        """[2b, T] right-padded rows: prompt+chosen rows, then prompt+rejected rows."""
        rows = [self.rows[i] for i in indices]
        prompts = [r["prompt_chosen"] for r in rows] + [r["prompt_rejected"] for r in rows]
        completions = [r["chosen"] for r in rows] + [r["rejected"] for r in rows]
        batch = {k: v.to(self.device) for k, v in collate_completions(prompts, completions, self.pad_id).items()}
        if rows[0]["margin"] is not None:
            batch["margin"] = torch.tensor([r["margin"] for r in rows], device=self.device)
        return batch

    # -- score, loss, step, log ----------------------------------------------------------------------

    def training_step(self, rows: list[int]) -> dict[str, float]:
        micro = self.micro_batches(rows)
        logged = []
        for i, indices in enumerate(micro):
            batch = self.collate(indices)
            rewards = rewards_of(self.model, batch["input_ids"], batch["attention_mask"])  # [2b]
            chosen, rejected = rewards.chunk(2)

            loss = bradley_terry_loss(
                chosen, rejected, margin=batch.get("margin"),
                center_rewards_coefficient=self.args.center_rewards_coefficient,
            )
            self.backward(loss / len(micro), i, len(micro))

            with torch.no_grad():
                logged.append({
                    "loss": loss.item(),
                    "accuracy": (chosen > rejected).float().mean().item(),
                    "margin": (chosen - rejected).mean().item(),
                    "min_reward": rewards.min().item(),
                    "mean_reward": rewards.mean().item(),
                    "max_reward": rewards.max().item(),
                })
            num_tokens = self.count_tokens(batch["attention_mask"])
        metrics = {k: sum(r[k] for r in logged) / len(logged) for k in logged[0]}
        metrics["min_reward"] = min(r["min_reward"] for r in logged)
        metrics["max_reward"] = max(r["max_reward"] for r in logged)
        return {**metrics, **num_tokens, **self.optimizer_step()}

    @torch.no_grad()
    def score(self, prompts: list, completions: list, batch_size: int = 64) -> torch.Tensor:
        """Rewards [N] of prompt/completion pairs under the current model (eval mode)."""
        model = self.unwrapped_model
        was_training = model.training
        model.eval()
        out = []
        for i in range(0, len(prompts), batch_size):
            pairs = [tokenize_pair(self.tokenizer, p, c) for p, c in zip(prompts[i:i + batch_size], completions[i:i + batch_size])]
            batch = collate_completions([p for p, _ in pairs], [c for _, c in pairs], self.pad_id)
            out.append(rewards_of(model, batch["input_ids"].to(self.device), batch["attention_mask"].to(self.device)).cpu())
        model.train(was_training)
        return torch.cat(out)
