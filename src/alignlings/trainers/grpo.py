"""GRPOTrainer: Group Relative Policy Optimization on any transformers causal LM.

Shao et al., "DeepSeekMath" (2024), with TRL 1.16's defaults (token-level "dapo" aggregation,
beta = 0). Every ``num_iterations`` optimiser steps the trainer draws a batch of prompts and:

    generate  samples G = ``num_generations`` completions per prompt from left-padded prompts with
              a lean KV-cache loop (``modeling.sample_with_cache``, inverse-CDF draws;
              ``generation_backend="cache_exact"`` draws as ``generate`` does, ``"generate"`` uses
              transformers' ``generate``): temperature, top-p, top-k; the completion mask ends
              at the first EOS (the tokenizer's or one the model's generation config declares);
    score     calls each reward function ``f(prompts, completions, **columns) -> list[float]``,
              sums them with ``reward_weights`` and turns them into group-relative advantages
              (``alignlings.losses.grpo.grpo_advantages``) over the whole global batch; keeps the
              sampling policy's log-probs when ``num_iterations > 1`` and the reference's when
              ``beta > 0``;
then each optimiser step, per micro-batch:
    loss      log-probs of the completion tokens at the sampling temperature and
              ``alignlings.losses.grpo.grpo_loss`` (clipped ratio, optional k3 KL, aggregation);
    step      gradient accumulation, clipping and AdamW in ``BaseTrainer``;
    log       TRL's keys: ``reward``, ``reward_std``, ``frac_reward_zero_std``,
              ``rewards/<func>/mean`` and ``/std``, ``completions/mean_length`` (and min, max,
              ``clipped_ratio``), ``kl`` (beta > 0), ``entropy``, ``clip_ratio/low_mean``,
              ``clip_ratio/high_mean``, ``clip_ratio/region_mean``, plus ``loss``, ``grad_norm``,
              ``learning_rate``.

Shapes: G generations per prompt, b = ``per_device_train_batch_size`` completions per micro-batch,
B completions per process per step, P prompt tokens (left-padded), C completion tokens, K reward
functions.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence

import torch

from alignlings.losses.grpo import grpo_advantages, grpo_loss, grpo_metrics
from alignlings.trainers.base import BaseTrainer
from alignlings.trainers.configs import GRPOConfig
from alignlings.trainers.data import (
    check_columns, completion_mask_until_eos, load_rows, pad_token_id, left_pad_prompts, tokenize_prompt,
)
from alignlings.trainers.distributed import all_gather_cat, all_reduce_sum
from alignlings.trainers.modeling import (
    check_lean_path, completion_logprobs, disable_dropout, eos_token_ids, generation_config, is_peft_model, masked_entropy,
    prepare_model, sample, sample_with_cache, sampler_logprobs,
)

RewardFunc = Callable[..., Sequence[float | None]]


def _func_name(func) -> str:
    if isinstance(func, torch.nn.Module):
        return getattr(getattr(func, "config", None), "_name_or_path", None) or type(func).__name__
    return getattr(func, "__name__", type(func).__name__)


class GRPOTrainer(BaseTrainer):
    """Train ``model`` with GRPO against one or more reward functions.

    Args:
        model: a transformers causal LM (the policy).
        reward_funcs: a function ``f(prompts, completions, **kwargs) -> list[float | None]`` or a list
            of them. ``kwargs`` holds the dataset's other columns (one value per completion) and
            ``completion_ids``; ``None`` means "not scored" (counts as 0 in the sum, as TRL's nansum).
            A reward model (``alignlings.RewardModel`` or a sequence classifier) sharing the policy's
            tokenizer may stand in for a function.
        args: a ``GRPOConfig``.
        train_dataset: prompt-only rows: a ``prompt`` column plus anything the reward functions read.
        processing_class: the tokenizer.
        ref_model: the reference for the KL term; only used (and, when None, copied from ``model``)
            when ``args.beta > 0``.
        peft_config: a ``peft.PeftConfig``: train adapters only; with ``beta > 0`` and no
            ``ref_model`` the reference is the base network with the adapters disabled (no copy).
    """

    name = "grpo"
    progress_keys = ("reward", "loss", "kl")
    drop_last = True  # TRL's RepeatSampler keeps only full batches of prompts

    def __init__(self, model, reward_funcs: RewardFunc | Sequence[RewardFunc], args: GRPOConfig | None = None,
                 train_dataset=None, processing_class=None, ref_model=None, peft_config=None) -> None:
        args = args or GRPOConfig()
        dataset = load_rows(train_dataset)
        check_columns(dataset, ("prompt",), "GRPOTrainer")
        super().__init__(prepare_model(model, args, peft_config), args, dataset, processing_class)
        self.reward_funcs = list(reward_funcs) if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
        self.reward_func_names = [_func_name(f) for f in self.reward_funcs]
        K = len(self.reward_funcs)
        weights = args.reward_weights if args.reward_weights is not None else [1.0] * K
        if len(weights) != K:
            raise ValueError(f"reward_weights: expected {K} weights, one per reward function, got {len(weights)}")
        self.reward_weights = torch.tensor(weights, dtype=torch.float32)

        self.rows = dataset
        self.prompt_ids = [tokenize_prompt(processing_class, row["prompt"]) for row in self.rows]
        self.pad_id = pad_token_id(processing_class)
        # a completion ends at the tokenizer's EOS or any EOS the model's generation config adds (TRL 1.16)
        self.eos_ids = eos_token_ids(processing_class, self.unwrapped_model)
        self.gen_config = generation_config(
            processing_class, max_new_tokens=args.max_completion_length, temperature=args.temperature,
            top_p=args.top_p, top_k=args.top_k, pad_id=self.pad_id, eos_ids=self.eos_ids, min_p=args.min_p,
            repetition_penalty=args.repetition_penalty,
        )
        self.ref_model = None
        self.ref_is_base = args.beta > 0 and ref_model is None and is_peft_model(self.unwrapped_model)
        if args.beta > 0 and not self.ref_is_base:  # only then is a reference needed (TRL loads none at beta = 0)
            ref = ref_model if ref_model is not None else copy.deepcopy(self.unwrapped_model)
            self.ref_model = ref.to(self.device).eval().requires_grad_(False)
            if args.disable_dropout:
                disable_dropout(self.ref_model)
        rows_per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps
        self.prompts_per_step = rows_per_step // args.num_generations
        self._setup_optimizer(self.prompts_per_step, len(self.rows))

    def next_rows(self) -> list[int]:
        """New prompts only on steps that generate; the others reuse the batch (num_iterations > 1)."""
        return self.data.next() if self.step % self.args.num_iterations == 0 else []

    # -- generate ------------------------------------------------------------------------------------

    def generate(self, indices: list[int]) -> dict[str, torch.Tensor]:
        """G completions for each prompt: ids [B, P + C], attention mask, completion mask [B, P + C]."""
        G = self.args.num_generations
        prompts = [self.prompt_ids[i] for i in indices for _ in range(G)]  # each prompt G times, adjacent
        prompt_ids, prompt_mask = left_pad_prompts(prompts, self.pad_id)
        prompt_ids, prompt_mask = prompt_ids.to(self.device), prompt_mask.to(self.device)
        args = self.args
        if args.generation_backend == "generate" or args.model_forward:
            completion_ids = sample(self.model, prompt_ids, prompt_mask, self.gen_config)  # [B, C]
        else:
            completion_ids = sample_with_cache(
                self.model, prompt_ids, prompt_mask, max_new_tokens=args.max_completion_length,
                temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, eos_ids=self.eos_ids,
                pad_id=self.pad_id, draw="multinomial" if args.generation_backend == "cache_exact" else "cdf",
                min_p=args.min_p, repetition_penalty=args.repetition_penalty,
            )
        # truncated: TRL's rule, the last kept token is neither an EOS nor the pad id
        until_eos, truncated = completion_mask_until_eos(completion_ids, self.eos_ids, self.pad_id)
        completion_ids = completion_ids.masked_fill(until_eos == 0, self.pad_id)
        completion_mask = until_eos
        if self.args.mask_truncated_completions:  # still scored, but left out of the loss
            completion_mask = until_eos * (~truncated).unsqueeze(1).long()
        return {
            "lengths": until_eos.sum(1),
            "input_ids": torch.cat([prompt_ids, completion_ids], dim=1),
            "attention_mask": torch.cat([prompt_mask, until_eos], dim=1),
            "completion_mask": torch.cat([torch.zeros_like(prompt_mask), completion_mask], dim=1),
            "completion_ids": completion_ids,
            "truncated": truncated,
        }

    # -- score ---------------------------------------------------------------------------------------

    def rewards(self, indices: list[int], completion_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """[B, K] rewards of this process's completions; NaN where a function returned None."""
        G = self.args.num_generations
        rows = [self.rows[i] for i in indices for _ in range(G)]
        prompts = [row["prompt"] for row in rows]
        ids = [seq[:n] for seq, n in zip(completion_ids.tolist(), lengths.tolist())]
        texts = self.tokenizer.batch_decode(ids, skip_special_tokens=True)
        conversational = isinstance(prompts[0], list)
        completions = [[{"role": "assistant", "content": t}] for t in texts] if conversational else texts
        columns = {k: [row[k] for row in rows] for k in rows[0] if k != "prompt"}
        out = torch.empty(len(rows), len(self.reward_funcs), dtype=torch.float32)
        for k, func in enumerate(self.reward_funcs):
            if isinstance(func, torch.nn.Module):
                values = self._model_rewards(func, prompts, texts)
            else:
                values = func(prompts=prompts, completions=completions, completion_ids=ids, **columns)
            out[:, k] = torch.tensor([math.nan if v is None else float(v) for v in values])
        return out

    @torch.no_grad()
    def _model_rewards(self, reward_model: torch.nn.Module, prompts: list, texts: list[str]) -> list[float]:
        from alignlings.trainers.data import collate_completions, prompt_text, tokenize_pair
        from alignlings.trainers.reward import rewards_of

        pairs = [tokenize_pair(self.tokenizer, prompt_text(self.tokenizer, p), t) for p, t in zip(prompts, texts)]
        batch = collate_completions([p for p, _ in pairs], [c for _, c in pairs], self.pad_id)
        return rewards_of(reward_model, batch["input_ids"].to(self.device), batch["attention_mask"].to(self.device)).tolist()

    def per_token_logps(self, model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """[B, C] log-probs of the completion tokens under ``model``, in micro-batches, under inference
        mode (no autograd bookkeeping; the lean decoder's single pass where the model has one, see
        ``modeling.lm_logits``); the result is copied out of it for the loss."""
        C = batch["completion_ids"].shape[1]
        out = []
        with torch.inference_mode():
            for rows in self.micro_batches(list(range(batch["input_ids"].shape[0]))):
                logps, _ = completion_logprobs(
                    model, batch["input_ids"][rows], batch["attention_mask"][rows], batch["completion_mask"][rows],
                    temperature=self.args.temperature, logits_to_keep=C + 1, lean=self.lean,
                )
                out.append(logps.per_token)
        return torch.cat(out).clone()

    def generate_and_score(self, indices: list[int]) -> dict:
        """The batch the next ``num_iterations`` steps train on, with its advantages and metrics."""
        args, G = self.args, self.args.num_generations
        batch = self.generate(indices)
        rewards_local = self.rewards(indices, batch["completion_ids"], batch["lengths"])  # [B, K]

        # Advantages over the global batch (groups never straddle processes, but "batch" scaling and
        # the logged statistics see every process's rewards).
        rewards_all = all_gather_cat(rewards_local.to(self.device)).cpu()  # [B_all, K]
        P_all = rewards_all.shape[0] // G
        grouped = rewards_all.view(P_all, G, -1)  # [P_all, G, K]
        advantages = grpo_advantages(grouped, scale_rewards=args.scale_rewards, reward_weights=self.reward_weights)
        advantages = torch.nan_to_num(advantages.flatten(), nan=0.0)  # [B_all]
        B = rewards_local.shape[0]
        batch["advantages"] = advantages[self.dist.rank * B: (self.dist.rank + 1) * B].to(self.device)

        batch["old_logps"] = self.per_token_logps(self.model, batch) if args.num_iterations > 1 else None
        if self.ref_is_base:
            with self.unwrapped_model.disable_adapter():
                batch["ref_logps"] = self.per_token_logps(self.unwrapped_model, batch)
        else:
            batch["ref_logps"] = self.per_token_logps(self.ref_model, batch) if self.ref_model is not None else None
        batch["metrics"] = self._generation_metrics(rewards_all, batch)
        return batch

    def _generation_metrics(self, rewards_all: torch.Tensor, batch: dict) -> dict[str, float]:
        G = self.args.num_generations
        total = (rewards_all * self.reward_weights).nansum(dim=1)  # [B_all]
        group_std = total.view(-1, G).std(dim=1)
        lengths = all_gather_cat(batch["lengths"].float())
        truncated = all_gather_cat(batch["truncated"].float().to(self.device))
        zero = torch.zeros((), dtype=torch.float64)
        values = [  # 0-d tensors, read back together (one sync instead of one per metric)
            total.mean(),
            total.std() if total.numel() > 1 else zero,
            torch.isclose(group_std, torch.zeros_like(group_std)).float().mean(),
            lengths.mean(),
            lengths.min(),
            lengths.max(),
            truncated.mean(),
        ]
        keys = ["reward", "reward_std", "frac_reward_zero_std", "completions/mean_length", "completions/min_length",
                "completions/max_length", "completions/clipped_ratio"]
        for k, name in enumerate(self.reward_func_names):
            column = rewards_all[:, k]
            finite = column[~column.isnan()]
            values += [torch.nanmean(column), finite.std() if finite.numel() > 1 else zero]
            keys += [f"rewards/{name}/mean", f"rewards/{name}/std"]
        # float64 holds each value exactly, as .item() would give it
        metrics = dict(zip(keys, torch.stack([v.to(device="cpu", dtype=torch.float64) for v in values]).tolist()))
        return metrics

    def _lean_check_logps(self, batch: dict, rows: list[int], lean: bool) -> torch.Tensor:
        """What ``lean_check_steps`` compares for GRPO: the scoring pass's completion log-probs of the
        first micro-batch, and the sampler's prefill and first token step on its prompts."""
        C = batch["completion_ids"].shape[1]
        ids, mask = batch["input_ids"][rows], batch["attention_mask"][rows]
        scored = completion_logprobs(self.unwrapped_model, ids, mask, batch["completion_mask"][rows],
                                     temperature=self.args.temperature, logits_to_keep=C + 1, lean=lean)[0].per_token
        P = ids.shape[1] - C
        sampled = sampler_logprobs(self.unwrapped_model, ids[:, :P], mask[:, :P], ids[:, P:P + 1], lean=lean,
                                   scoring=self.args.generation_backend == "cache")
        return torch.cat([scored.flatten(), sampled.flatten()])

    # -- loss, step, log -----------------------------------------------------------------------------

    def training_step(self, indices: list[int]) -> dict[str, float]:
        args = self.args
        if indices:  # a generation step
            self.extra_state["batch"] = self.generate_and_score(indices)
        batch = self.extra_state["batch"]
        C = batch["completion_ids"].shape[1]
        micro = self.micro_batches(list(range(batch["input_ids"].shape[0])))
        # dapo divides by the completion tokens of the whole global batch; DDP then averages the
        # processes' gradients, so each process divides by (global tokens / processes), as TRL does.
        if args.loss_type == "dapo":
            tokens = all_reduce_sum(batch["completion_mask"].sum().float())
            num_items, scale = tokens / self.dist.world_size, 1.0
        else:
            num_items, scale = None, 1.0 / len(micro)

        logged, total_loss, entropy_sum, entropy_count = [], 0.0, 0.0, 0.0
        if self.lean_check_due():
            check_lean_path(self.model, lambda lean: self._lean_check_logps(batch, micro[0], lean), step=self.step,
                            tolerance=args.lean_check_tolerance)
        for i, rows in enumerate(micro):
            logps, logits = completion_logprobs(
                self.model, batch["input_ids"][rows], batch["attention_mask"][rows], batch["completion_mask"][rows],
                temperature=args.temperature, logits_to_keep=C + 1, lean=self.lean,
            )
            per_token = logps.per_token  # [b, C]
            mask = batch["completion_mask"][rows][:, -C:]
            old = None if batch["old_logps"] is None else batch["old_logps"][rows]
            ref = None if batch["ref_logps"] is None else batch["ref_logps"][rows]
            advantages = batch["advantages"][rows]

            loss = grpo_loss(
                per_token, old, ref, advantages, mask, loss_type=args.loss_type, beta=args.beta,
                epsilon=args.epsilon, epsilon_high=args.epsilon_high, delta=args.delta,
                importance_sampling_level=args.importance_sampling_level,
                use_bias_correction_kl=args.use_bias_correction_kl,
                max_completion_length=args.max_completion_length, num_items_in_batch=num_items,
            )
            self.backward(loss * scale, i, len(micro))

            total_loss += (loss * scale).item()
            logged.append(grpo_metrics(
                per_token.detach(), old, ref, advantages, mask, epsilon=args.epsilon,
                epsilon_high=args.epsilon_high, importance_sampling_level=args.importance_sampling_level,
            ))
            s, n = masked_entropy(logits, mask, args.temperature)
            entropy_sum, entropy_count = entropy_sum + s, entropy_count + n

        metrics = {k: sum(r[k] for r in logged) / len(logged) for k in logged[0]}
        metrics["loss"] = total_loss
        metrics["entropy"] = entropy_sum / max(entropy_count, 1.0)
        if indices:
            metrics.update(batch["metrics"])
        return {**metrics, **self.optimizer_step()}
