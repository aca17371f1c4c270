"""Configuration dataclasses for the trainers, with TRL 1.16's field names and defaults.

One dataclass per trainer (``DPOConfig``, ``RewardConfig``, ``GRPOConfig``) on top of
``TrainerConfig``, which holds what every trainer shares (optimiser, schedule, batch sizes,
checkpoints, logging). Every field documents its default; where TRL 1.16 has a field of the same
name the default is TRL's, and where that differs from the paper the docstring says so.
Validation lives in ``__post_init__`` so a bad value fails when the config is built, not
mid-training. ``load_config`` reads a TOML table and applies ``key=value`` overrides.

Batch sizes, as in TRL: one optimiser step sees ``per_device_train_batch_size *
gradient_accumulation_steps * world_size`` rows (preference pairs for DPO and the reward model,
completions for GRPO, so a GRPO step covers that number / ``num_generations`` prompts).
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_type_hints

from alignlings._validate import check_choice, check_range

#: the names ``transformers.get_scheduler`` takes without extra arguments
LR_SCHEDULERS = ("linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup",
                 "inverse_sqrt")


def _positive_int(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}: expected an int >= 1, got {value!r}")


@dataclass
class TrainerConfig:
    """Fields shared by every trainer."""

    output_dir: str = "runs/alignlings"
    """Folder for ``metrics.jsonl``, ``metrics.png``, ``checkpoint-<step>/`` and the final model."""

    learning_rate: float = 1e-6
    """Peak AdamW learning rate (default 1e-6, TRL's DPO and GRPO default)."""

    per_device_train_batch_size: int = 8
    """Rows per forward/backward pass on each process (pairs for DPO/reward, completions for GRPO)."""

    gradient_accumulation_steps: int = 1
    """Micro-batches whose gradients are summed before one optimiser step (default 1)."""

    max_steps: int = -1
    """Optimiser steps to run (default -1, TRL's: ``num_train_epochs`` passes over the dataset)."""

    num_train_epochs: float = 3.0
    """Passes over the dataset when ``max_steps`` is -1 (default 3.0, TRL's). An epoch is
    ceil(rows / rows per step) steps for DPO and the reward model (the last batch may be smaller)
    and floor(prompts / prompts per step) for GRPO (TRL's sampler drops the partial batch)."""

    max_grad_norm: float = 1.0
    """Clip the global gradient norm to this value before each step (default 1.0); 0 disables clipping."""

    weight_decay: float = 0.0
    """AdamW weight decay (default 0.0). As in transformers' ``Trainer``, biases and normalisation
    weights are never decayed."""

    adam_beta1: float = 0.9
    """AdamW beta1 (default 0.9)."""

    adam_beta2: float = 0.999
    """AdamW beta2 (default 0.999)."""

    adam_epsilon: float = 1e-8
    """AdamW epsilon (default 1e-8)."""

    optim: str = "adamw_torch_fused"
    """"adamw_torch_fused" (default, TRL's: one fused kernel for all parameters, CPU or GPU) or
    "adamw_torch" (the per-parameter loop)."""

    lr_scheduler_type: str = "linear"
    """A ``transformers.get_scheduler`` name: "linear" (default, TRL's: decay to 0 at the last step),
    "cosine", "constant" (ignores warm-up, as in transformers), "constant_with_warmup", ... (see
    ``LR_SCHEDULERS``)."""

    warmup_steps: float = 0
    """Linear warm-up from 0: the learning rate is ``learning_rate * s / warmup`` at step s (default 0).
    A value >= 1 is a number of steps, a value < 1 a fraction of the run (transformers' rule)."""

    seed: int = 42
    """Seeds Python, NumPy and torch, the data order and the sampling (default 42, TRL's)."""

    logging_steps: int = 10
    """Write the mean of the last ``logging_steps`` steps' metrics to ``metrics.jsonl`` (default 10)."""

    save_steps: int = 500
    """Save a resumable checkpoint every this many steps (default 500); 0 saves none but the final model."""

    save_total_limit: int | None = None
    """Keep only the newest this many checkpoints (default None: keep all)."""

    resume_from_checkpoint: str | None = None
    """A ``checkpoint-<step>`` folder, or "latest" for the newest one in ``output_dir`` (default None)."""

    disable_dropout: bool = True
    """Set every dropout probability to 0 (default True, TRL's for DPO and reward; TRL's GRPO says False).
    With dropout on, the policy and the reference (or old policy) differ even with equal weights."""

    disable_tqdm: bool = False
    """Hide the progress bar (default False)."""

    plot: bool = False
    """After training, draw every logged metric against the step into ``output_dir/metrics.png``."""

    use_cpu: bool = False
    """Run on the CPU even when a GPU is available (default False)."""

    save_final_model: bool = True
    """``save_pretrained`` the trained model (and tokenizer) into ``output_dir`` at the end (default True)."""

    bf16: bool = False
    """Mixed precision as transformers' ``Trainer`` does it: forward passes under
    ``torch.autocast(dtype=bfloat16)``, float32 weights, gradients and optimiser (default False; TRL's
    default is True, which its CPU runs must turn off). Runs on CPUs too (torch's CPU autocast)."""

    gradient_checkpointing: bool = False
    """Recompute each layer's activations in the backward pass instead of keeping them: less memory,
    about one more forward of time (default False, TRL's). Uses the model's
    ``gradient_checkpointing_enable``; a model without it is refused."""

    gradient_checkpointing_kwargs: dict | None = None
    """Passed to ``gradient_checkpointing_enable`` (default None = ``{"use_reentrant": False}``,
    TRL 1.16's default)."""

    model_forward: bool = False
    """Score through the model's own ``forward`` and sample (GRPO) with its ``generate``, instead of
    the lean decoder and the KV-cache sampler (ours; default False). The stock path: slower on small
    models, no dependence on how the lean decoder re-implements a model. The lean path is taken only
    on the transformers versions its parity tests ran on (``trainers.versions.TESTED_TRANSFORMERS``),
    elsewhere ``forward`` with one notice. The command line's ``--model-forward``."""

    lean_check_steps: int = 0
    """Every this many steps, score the step's first batch through both the lean decoder and the
    model's ``forward`` (no gradient) and stop with an error naming the difference when their
    completion log-probs differ by more than ``lean_check_tolerance`` (default 0 = never). A guard
    against silent drift when transformers changes under the lean decoder."""

    lean_check_tolerance: float = 1e-3
    """Largest difference of a completion token's log-prob the ``lean_check_steps`` check accepts
    (default 1e-3: float32 rounding stays near 1e-5; bf16 needs about 0.1)."""

    def __post_init__(self) -> None:
        check_range("learning_rate", float(self.learning_rate), low=0.0)
        check_range("lean_check_steps", self.lean_check_steps, low=0)
        check_range("lean_check_tolerance", float(self.lean_check_tolerance), low=0.0, low_open=True)
        if not isinstance(self.model_forward, bool):
            raise ValueError(f"model_forward: expected true or false, got {self.model_forward!r}")
        _positive_int("per_device_train_batch_size", self.per_device_train_batch_size)
        _positive_int("gradient_accumulation_steps", self.gradient_accumulation_steps)
        if self.max_steps != -1:
            _positive_int("max_steps", self.max_steps)
        check_range("num_train_epochs", float(self.num_train_epochs), low=0.0, low_open=True)
        check_range("max_grad_norm", float(self.max_grad_norm), low=0.0)
        check_range("weight_decay", float(self.weight_decay), low=0.0)
        check_choice("optim", self.optim, ("adamw_torch_fused", "adamw_torch"))
        check_choice("lr_scheduler_type", self.lr_scheduler_type, LR_SCHEDULERS)
        check_range("warmup_steps", self.warmup_steps, low=0)
        _positive_int("logging_steps", self.logging_steps)
        check_range("save_steps", self.save_steps, low=0)
        if self.save_total_limit is not None:
            _positive_int("save_total_limit", self.save_total_limit)


@dataclass
class DPOConfig(TrainerConfig):
    """Direct Preference Optimization (Rafailov et al., 2023); TRL 1.16's ``DPOConfig`` names."""

    beta: float = 0.1
    """Strength of the pull toward the reference model (default 0.1, TRL's and the paper's usual value)."""

    loss_type: str = "sigmoid"
    """A key of ``alignlings.losses.dpo.DPO_LOSSES`` (default "sigmoid", the paper's loss)."""

    label_smoothing: float = 0.0
    """Label-noise rate for robust / exo_pair / aot losses (default 0.0)."""

    max_length: int | None = 1024
    """Prompt + completion tokens kept per row (default 1024, TRL's); None keeps everything."""

    truncation_mode: str = "keep_start"
    """Which end of a too-long row survives: "keep_start" (default, TRL's) or "keep_end"."""

    precompute_ref_log_probs: bool = False
    """Score the whole dataset with the reference once before training, then drop the reference
    model (default False: the reference scores each batch, without gradient)."""

    learning_rate: float = 1e-6
    """Peak AdamW learning rate (default 1e-6, TRL's)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        from alignlings.losses.dpo import DPO_LOSSES

        check_range("beta", float(self.beta), low=0.0, low_open=True)
        check_choice("loss_type", self.loss_type, DPO_LOSSES)
        check_range("label_smoothing", float(self.label_smoothing), low=0.0, high=1.0)
        check_choice("truncation_mode", self.truncation_mode, ("keep_start", "keep_end"))
        if self.max_length is not None:
            _positive_int("max_length", self.max_length)


@dataclass
class RewardConfig(TrainerConfig):
    """Bradley-Terry reward model training; TRL 1.16's ``RewardConfig`` names."""

    learning_rate: float = 1e-4
    """Peak AdamW learning rate (default 1e-4, TRL's RewardConfig default)."""

    max_length: int | None = 1024
    """Prompt + completion tokens kept per row, from the start (default 1024, TRL's)."""

    center_rewards_coefficient: float | None = None
    """Weight of the penalty mean((r_c + r_r)^2) that keeps rewards near zero (Eisenstein et al., 2023);
    default None = off, as TRL."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_length is not None:
            _positive_int("max_length", self.max_length)
        if self.center_rewards_coefficient is not None:
            check_range("center_rewards_coefficient", float(self.center_rewards_coefficient), low=0.0)


@dataclass
class GRPOConfig(TrainerConfig):
    """Group Relative Policy Optimization (Shao et al., DeepSeekMath, 2024); TRL 1.16's ``GRPOConfig``
    names and defaults, which differ from the paper: token-level "dapo" aggregation and beta = 0 (no
    reference model) where the paper averages per sequence and uses beta = 0.04."""

    num_generations: int = 8
    """G, completions sampled per prompt (default 8). Each process's
    ``per_device_train_batch_size * gradient_accumulation_steps`` must be a multiple of it."""

    max_completion_length: int = 512
    """Most new tokens per completion (default 512, TRL's)."""

    temperature: float = 1.0
    """Sampling temperature; log-probs are computed from logits / temperature too (default 1.0)."""

    top_p: float = 1.0
    """Nucleus sampling mass (default 1.0 = off)."""

    top_k: int = 0
    """Keep the k most likely tokens when sampling (default 0 = off)."""

    min_p: float | None = None
    """Drop tokens whose probability is under ``min_p`` times the likeliest token's, after temperature
    (transformers' ``MinPLogitsWarper``; default None = off, TRL's; typical values 0.01-0.2)."""

    repetition_penalty: float = 1.0
    """Divide the logit of a token already in the row (the prompt's or drawn) by this when positive,
    multiply when negative (transformers' ``RepetitionPenaltyLogitsProcessor``; default 1.0 = off,
    TRL's). Sampling only: the loss's log-probs are those of logits / temperature, as in TRL."""

    beta: float = 0.0
    """KL coefficient toward the reference (default 0.0, TRL's: no reference model is loaded;
    the DeepSeekMath paper uses 0.04)."""

    epsilon: float = 0.2
    """Lower clip range of the ratio (default 0.2, as PPO and TRL)."""

    epsilon_high: float | None = None
    """Upper clip range (default None = epsilon; DAPO's clip-higher uses 0.28)."""

    delta: float | None = None
    """Cap on the unclipped ratio, two-sided clipping (default None = off)."""

    num_iterations: int = 1
    """Optimiser steps per generated batch, mu in the paper (default 1). Above 1 the sampling
    policy's log-probs are kept and the ratio moves away from 1."""

    scale_rewards: str = "group"
    """"group" (default): divide advantages by the group's std; "batch": by the batch's std;
    "none": centre only (Dr. GRPO)."""

    loss_type: str = "dapo"
    """A key of ``GRPO_AGGREGATIONS``: "dapo" (default, TRL's: over all completion tokens of the
    global batch), "grpo" (the paper's per-sequence mean), "bnpo", "dr_grpo"."""

    importance_sampling_level: str = "token"
    """"token" (default) or "sequence" (GSPO, Zheng et al., 2025)."""

    use_bias_correction_kl: bool = True
    """Multiply the per-token k3 KL by the importance ratio (default True, TRL 1.16's)."""

    reward_weights: list[float] | None = None
    """Weight of each reward function in the summed reward (default None: all 1)."""

    generation_backend: str = "cache"
    """How completions are sampled (ours; TRL's choices are vLLM, paged or ``generate``): "cache"
    (default), a lean KV-cache loop (``modeling.sample_with_cache``; GPT-2 and Llama-layout models
    step through ``decode.LeanDecoder``) drawing each token by inverse transform sampling (one uniform
    per row: the same distribution as ``generate``'s multinomial, not the same tokens for a seed);
    "cache_exact", the same loop drawing with ``torch.multinomial`` as ``generate`` does (the very
    tokens ``generate`` draws for the same seed, slower: one exponential per vocabulary entry and
    token); or "generate" (transformers' ``generate``)."""

    mask_truncated_completions: bool = False
    """Leave completions that hit ``max_completion_length`` without EOS out of the loss (default False)."""

    disable_dropout: bool = False
    """Set every dropout probability to 0 (default False, TRL's GRPO default: a model with dropout
    then samples and trains with it, in training mode, as TRL; such a model goes through ``forward``,
    since the lean decoder reproduces no dropout)."""

    learning_rate: float = 1e-6
    """Peak AdamW learning rate (default 1e-6, TRL's)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        from alignlings.losses.grpo import GRPO_AGGREGATIONS, SCALE_REWARDS

        _positive_int("num_generations", self.num_generations)
        if self.num_generations < 2:
            raise ValueError(f"num_generations: GRPO compares completions within a group, expected >= 2, got {self.num_generations}")
        rows = self.per_device_train_batch_size * self.gradient_accumulation_steps
        if rows % self.num_generations:
            raise ValueError(
                f"per_device_train_batch_size: per_device_train_batch_size * gradient_accumulation_steps = {rows} "
                f"must be a multiple of num_generations = {self.num_generations} (whole groups on each process)"
            )
        _positive_int("max_completion_length", self.max_completion_length)
        check_range("temperature", float(self.temperature), low=0.0, low_open=True)
        check_range("top_p", float(self.top_p), low=0.0, high=1.0, low_open=True)
        check_range("top_k", self.top_k, low=0)
        if self.min_p is not None:
            check_range("min_p", float(self.min_p), low=0.0, high=1.0)
        check_range("repetition_penalty", float(self.repetition_penalty), low=0.0, low_open=True)
        check_range("beta", float(self.beta), low=0.0)
        check_range("epsilon", float(self.epsilon), low=0.0)
        if self.epsilon_high is not None:
            check_range("epsilon_high", float(self.epsilon_high), low=0.0)
        if self.delta is not None:
            check_range("delta", float(self.delta), low=1.0, low_open=True)
        _positive_int("num_iterations", self.num_iterations)
        check_choice("scale_rewards", self.scale_rewards, SCALE_REWARDS)
        check_choice("loss_type", self.loss_type, GRPO_AGGREGATIONS)
        check_choice("importance_sampling_level", self.importance_sampling_level, ("token", "sequence"))
        check_choice("generation_backend", self.generation_backend, ("cache", "cache_exact", "generate"))


# ---------------------------------------------------------------------------------------------
# TOML files and command-line overrides
# ---------------------------------------------------------------------------------------------


def _coerce(cls: type, name: str, raw: Any) -> Any:
    """Turn a TOML value or a command-line string into the type of field ``name``."""
    hint = str(get_type_hints(cls)[name])
    if not isinstance(raw, str):
        return raw
    text = raw.strip()
    if text.lower() in ("none", "null") and "None" in hint:
        return None
    if hint.startswith("bool") or hint == "<class 'bool'>":
        if text.lower() in ("true", "1", "yes", "on"):
            return True
        if text.lower() in ("false", "0", "no", "off"):
            return False
        raise ValueError(f"{name}: expected true or false, got {raw!r}")
    if "list" in hint:
        return [float(x) for x in text.strip("[]").split(",") if x.strip()]
    for kind, convert in (("int", int), ("float", float)):
        if hint.startswith(kind) or hint == f"<class '{kind}'>":
            try:
                return convert(text)
            except ValueError:
                if kind == "int":
                    return convert(float(text))  # "1e3" for an int field
                raise ValueError(f"{name}: expected a number, got {raw!r}") from None
    return text


@dataclass
class LoraArgs:
    """LoRA adapters for the command line and config files, with TRL 1.16's ``ModelConfig`` names and
    defaults (``trl/trainer/model_config.py``; TRL's scripts turn them into a ``peft.LoraConfig`` with
    ``get_peft_config``). From Python, pass a ``peft.LoraConfig`` as the trainers' ``peft_config``."""

    use_peft: bool = False
    """Train LoRA adapters instead of every weight; the reference is the base with adapters disabled."""
    lora_r: int = 16
    """Rank of each adapter's two factors."""
    lora_alpha: int = 32
    """Scale: the adapter's output is multiplied by ``lora_alpha / lora_r``."""
    lora_dropout: float = 0.05
    """Dropout on the adapter's input. The adapters are added before ``disable_dropout`` (default True
    for DPO and the reward model, False for GRPO, TRL 1.16's) runs, so that sets it to 0 when on, in
    TRL as here; it acts only with ``disable_dropout = false``."""
    lora_target_modules: list[str] | None = None
    """Module names to adapt (e.g. ``["q_proj", "v_proj"]``); None: peft's default for the architecture."""

    def __post_init__(self) -> None:
        if not isinstance(self.use_peft, bool):
            raise ValueError(f"use_peft: expected true or false, got {self.use_peft!r}")
        _positive_int("lora_r", self.lora_r)
        _positive_int("lora_alpha", self.lora_alpha)
        check_range("lora_dropout", self.lora_dropout, low=0.0, high=1.0, high_open=True)
        targets = self.lora_target_modules
        if isinstance(targets, str):  # "q_proj,v_proj" from the command line
            targets = self.lora_target_modules = [t.strip() for t in targets.split(",") if t.strip()]
        if targets is not None and (not targets or not all(isinstance(t, str) and t for t in targets)):
            raise ValueError(f"lora_target_modules: expected a list of module names, got {self.lora_target_modules!r}")

    def peft_config(self, task_type: str | None = "CAUSAL_LM"):
        """A ``peft.LoraConfig`` (as TRL's ``get_peft_config``: ``bias="none"``), or None without ``use_peft``."""
        if not self.use_peft:
            return None
        try:
            from peft import LoraConfig
        except ImportError as exc:
            raise ValueError("use_peft: the peft library is not installed (pip install 'alignlings[peft]')") from exc
        return LoraConfig(task_type=task_type, r=self.lora_r, lora_alpha=self.lora_alpha, lora_dropout=self.lora_dropout,
                          target_modules=self.lora_target_modules, bias="none")


#: LoraArgs' fields, read from a config file's top level
LORA_KEYS = ("use_peft", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules")


def config_from_dict(cls: type, values: dict[str, Any]):
    """Build ``cls`` from a dict, rejecting unknown keys with the list of known ones."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return cls(**{k: _coerce(cls, k, v) for k, v in values.items()})


def parse_overrides(pairs: list[str] | None) -> dict[str, str]:
    """["beta=0.2", "max_steps=10"] -> {"beta": "0.2", "max_steps": "10"}."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set: expected key=value, got {pair!r}")
        out[key.strip().replace("-", "_")] = value
    return out


def read_toml(path: str | Path | None) -> dict[str, Any]:
    """The parsed TOML file, or {} for None."""
    if path is None:
        return {}
    with open(path, "rb") as f:
        return tomllib.load(f)


def load_config(cls: type, section: dict[str, Any] | None = None, overrides: dict[str, Any] | None = None):
    """``cls`` from a TOML table with ``overrides`` (strings from the command line) applied on top."""
    values = dict(section or {})
    values.update(overrides or {})
    return config_from_dict(cls, values)


__all__ = [
    "TrainerConfig", "DPOConfig", "RewardConfig", "GRPOConfig", "LoraArgs", "LORA_KEYS",
    "config_from_dict", "load_config", "parse_overrides", "read_toml",
]
