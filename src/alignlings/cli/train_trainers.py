"""``alignlings train dpo|reward|grpo --config FILE.toml`` and ``alignlings train demo``.

A thin layer over ``alignlings.trainers``. A config file names the model, the dataset and (for
GRPO) the reward functions at the top level, and the trainer's config fields in a table named after
the command::

    model = "toy:addition"              # a from_pretrained folder, or the built-in warmed-up toy model
    dataset = "toy:addition"            # .jsonl/.json/.csv/.parquet, a save_to_disk folder, or toy:addition
    reward_funcs = ["toy:exact_match"]  # GRPO: "package.module:function" or toy:exact_match

    [grpo]
    learning_rate = 5e-4
    num_generations = 8

LoRA adapters (peft) with TRL's ``ModelConfig`` names, at the file's top level or as flags::

    use_peft = true                          # --use-peft
    lora_r = 16                              # --lora-r 16
    lora_alpha = 32                          # --lora-alpha 32
    lora_dropout = 0.05
    lora_target_modules = ["q_proj", "v_proj"]   # --lora-target-modules q_proj,v_proj

Any field can be overridden with ``--set key=value`` (repeatable) or the common flags below. The same
command runs under ``torchrun --nproc_per_node N -m alignlings train ...`` (DDP).
torch and transformers are imported inside the commands so ``alignlings --help`` stays fast.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Optional

import typer

from alignlings.cli.common import UsageError
from alignlings.cli.train_toy import say


TOY = "toy:addition"
#: files that hold a tokenizer's vocabulary (fast tokenizers, BPE, WordPiece, SentencePiece)
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "vocab.txt", "tokenizer.model", "spiece.model",
                   "sentencepiece.bpe.model")

ConfigOpt = typer.Option(None, "--config", "-c", help="TOML file: model, dataset, reward_funcs and a table named after the command (dpo, reward or grpo).")
SetOpt = typer.Option(None, "--set", "-s", help="Override a config field: --set beta=0.2 (repeatable).")
ModelOpt = typer.Option(None, "--model", help="Model folder (from_pretrained) or toy:addition; overrides the file.")
DatasetOpt = typer.Option(None, "--dataset", help="Dataset file/folder or toy:addition; overrides the file.")
OutOpt = typer.Option(None, "--output-dir", "-o", help="Where metrics.jsonl, checkpoints and the model go.")
StepsOpt = typer.Option(None, "--max-steps", help="Optimiser steps.")
LrOpt = typer.Option(None, "--learning-rate", "--lr", help="Peak learning rate.")
SeedOpt = typer.Option(None, "--seed", help="Random seed.")
PlotOpt = typer.Option(None, "--plot/--no-plot", help="Write metrics.png curves at the end.")
ResumeOpt = typer.Option(None, "--resume", help='Resume from a checkpoint folder or "latest".')
PeftOpt = typer.Option(None, "--use-peft/--no-peft", help="Train LoRA adapters (peft) instead of every weight; TRL's use_peft.")
LoraROpt = typer.Option(None, "--lora-r", help="LoRA rank (TRL's lora_r; default 16).")
LoraAlphaOpt = typer.Option(None, "--lora-alpha", help="LoRA scale numerator (TRL's lora_alpha; default 32).")
ModelForwardOpt = typer.Option(None, "--model-forward/--lean",
                               help="Score through the model's own forward and sample with generate (the stock "
                                    "path) instead of the lean decoder; the config field model_forward.")
LoraTargetsOpt = typer.Option(None, "--lora-target-modules",
                              help="Comma-separated module names, e.g. q_proj,v_proj (default: peft's choice).")


def _overrides(sets, output_dir, max_steps, learning_rate, seed, plot, resume) -> dict[str, Any]:
    from alignlings.trainers.configs import parse_overrides

    values: dict[str, Any] = parse_overrides(sets)
    flags = {"output_dir": output_dir, "max_steps": max_steps, "learning_rate": learning_rate, "seed": seed,
             "plot": plot, "resume_from_checkpoint": resume}
    values.update({k: v for k, v in flags.items() if v is not None})
    return values


def _lora_args(raw: dict[str, Any], use_peft, lora_r, lora_alpha, lora_target_modules):
    """``LoraArgs`` from the config file's top-level ``use_peft``/``lora_*`` keys, then the flags."""
    from alignlings.trainers.configs import LORA_KEYS, LoraArgs

    values = {k: raw[k] for k in LORA_KEYS if k in raw}
    flags = {"use_peft": use_peft, "lora_r": lora_r, "lora_alpha": lora_alpha, "lora_target_modules": lora_target_modules}
    values.update({k: v for k, v in flags.items() if v is not None})
    try:
        return LoraArgs(**values)
    except (ValueError, TypeError) as exc:
        raise typer.BadParameter(str(exc)) from exc


def _is_main_process() -> bool:
    """Process 0 under torchrun (or a single process): the only one that draws bars and prints."""
    import os

    return os.environ.get("RANK", "0") == "0"


def _load_model(spec: str):
    """(tokenizer, causal LM) from a local folder, or the toy task's warmed-up tiny GPT-2 (always the
    same starting model, warmed with seed 0; ``--seed`` seeds the training run, not this model).

    Raises ``typer.BadParameter`` naming ``--model`` when the folder is missing, has no readable
    ``config.json``, holds a model that is not a causal LM (a classifier, or an encoder such as BERT,
    which ``AutoModelForCausalLM`` loads but which attends both ways), or has no tokenizer files."""
    if spec == TOY:
        from alignlings.trainers import toy

        tokenizer, model, _, _ = toy.warm_model(seed=0, progress=_is_main_process())
        return tokenizer, model
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    if not Path(spec).is_dir():
        raise UsageError("model_not_folder", "--model", spec=spec)
    try:
        config = AutoConfig.from_pretrained(spec)
    except (OSError, ValueError) as exc:
        raise UsageError("model_no_config", "--model", spec=spec, why=exc) from exc
    try:
        model = AutoModelForCausalLM.from_pretrained(spec)
    except (ValueError, KeyError) as exc:
        kinds = ", ".join(getattr(config, "architectures", None) or [config.model_type])
        raise UsageError("model_not_lm", "--model", spec=spec, kinds=kinds) from exc
    from alignlings.trainers.modeling import is_causal

    if getattr(config, "is_encoder_decoder", False) or not is_causal(model):
        kind = type(model).__name__
        raise UsageError("model_not_causal", "--model", spec=spec, kind=kind)
    # AutoTokenizer builds a nearly empty tokenizer for a folder without any of these, and training
    # would then run on a handful of tokens: refuse instead
    if not any((Path(spec) / name).is_file() for name in TOKENIZER_FILES):
        raise UsageError("model_no_tokenizer", "--model", spec=spec, files=", ".join(TOKENIZER_FILES))
    try:
        tokenizer = AutoTokenizer.from_pretrained(spec)
    except (OSError, ValueError) as exc:
        raise UsageError("model_bad_tokenizer", "--model", spec=spec, why=exc) from exc
    return tokenizer, model


def _load_dataset(spec: str, kind: str, model=None, tokenizer=None):
    if spec != TOY:
        from alignlings.trainers.data import load_rows

        return load_rows(spec)
    from alignlings.trainers import toy

    train, _ = toy.addition_rows(0)
    if kind == "prompts":
        return train
    return toy.preference_pairs(model, tokenizer, train[:5000], seed=0)  # as the demo


def _load_reward_func(spec: str):
    if spec in ("toy:exact_match", TOY):
        from alignlings.trainers.toy import exact_match_reward

        return exact_match_reward
    module, sep, name = spec.partition(":")
    if not sep:
        raise UsageError("reward_func", "reward_funcs", got=spec)
    return getattr(importlib.import_module(module), name)


def _run(kind: str, config: Optional[Path], overrides: dict[str, Any], model_spec, dataset_spec,
         lora_flags: tuple = (None, None, None, None)) -> None:
    from alignlings.trainers import configs
    from alignlings.trainers.toy import accuracy, addition_rows

    try:
        raw = configs.read_toml(config)
        cls = {"dpo": configs.DPOConfig, "reward": configs.RewardConfig, "grpo": configs.GRPOConfig}[kind]
        args = configs.load_config(cls, raw.get(kind, {}), overrides)
    except (ValueError, OSError) as exc:
        raise typer.BadParameter(str(exc)) from exc
    lora = _lora_args(raw, *lora_flags)
    try:  # the reward model's adapters sit on its backbone, which has no LM head of its own
        peft_config = lora.peft_config(task_type=None if kind == "reward" else "CAUSAL_LM")
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    model_spec = model_spec or raw.get("model")
    dataset_spec = dataset_spec or raw.get("dataset")
    if not model_spec or not dataset_spec:
        raise UsageError("model_and_dataset", "--model/--dataset")

    tokenizer, model = _load_model(model_spec)
    toy_eval = model_spec == TOY
    heldout = addition_rows(0)[1] if toy_eval else None
    before = accuracy(model, tokenizer, heldout) if toy_eval else None

    from alignlings.trainers import DPOTrainer, GRPOTrainer, RewardTrainer

    if kind == "dpo":
        trainer = DPOTrainer(model, args=args, train_dataset=_load_dataset(dataset_spec, "pairs", model, tokenizer),
                             processing_class=tokenizer, peft_config=peft_config)
    elif kind == "reward":
        trainer = RewardTrainer(model, args=args, train_dataset=_load_dataset(dataset_spec, "pairs", model, tokenizer),
                                processing_class=tokenizer, peft_config=peft_config)
    else:
        funcs = raw.get("reward_funcs") or (["toy:exact_match"] if dataset_spec == TOY else [])
        if not funcs:
            raise UsageError("grpo_reward", "reward_funcs")
        trainer = GRPOTrainer(model, [_load_reward_func(f) for f in funcs], args=args,
                              train_dataset=_load_dataset(dataset_spec, "prompts"), processing_class=tokenizer,
                              peft_config=peft_config)
    history = trainer.train()
    if trainer.dist.is_main:
        last = history[-1] if history else {}
        shown = {k: round(v, 4) for k, v in last.items() if k in trainer.progress_keys or k == "step"}
        typer.echo(say("trained", kind=kind, metrics=shown, path=Path(args.output_dir) / "metrics.jsonl"))
        if toy_eval and kind != "reward":
            after = accuracy(trainer.unwrapped_model, tokenizer, heldout)
            typer.echo(say("heldout", n=len(heldout), before=f"{before:.1%}", after=f"{after:.1%}"))
    # Under torchrun: free the trainer (it holds the DDP wrapper) before the process group goes,
    # then a barrier and the teardown (distributed.shutdown says why the order matters).
    from alignlings.trainers.distributed import shutdown

    del trainer, model
    shutdown()


TRAINER_COMMANDS = {
    "dpo": "Train a causal LM with DPO on prompt/chosen/rejected rows (alignlings.trainers.DPOTrainer).",
    "reward": "Train a Bradley-Terry reward model on prompt/chosen/rejected rows (alignlings.trainers.RewardTrainer).",
    "grpo": "Train a causal LM with GRPO against reward functions (alignlings.trainers.GRPOTrainer).",
}


def _trainer_command(kind: str, doc: str):
    """`alignlings train KIND`: the three trainers share their options and differ only in KIND."""

    def command(config: Optional[Path] = ConfigOpt, sets: Optional[list[str]] = SetOpt, model: Optional[str] = ModelOpt,
                dataset: Optional[str] = DatasetOpt, output_dir: Optional[str] = OutOpt,
                max_steps: Optional[int] = StepsOpt, learning_rate: Optional[float] = LrOpt,
                seed: Optional[int] = SeedOpt, plot: Optional[bool] = PlotOpt, resume: Optional[str] = ResumeOpt,
                use_peft: Optional[bool] = PeftOpt, lora_r: Optional[int] = LoraROpt,
                lora_alpha: Optional[int] = LoraAlphaOpt, lora_target_modules: Optional[str] = LoraTargetsOpt,
                model_forward: Optional[bool] = ModelForwardOpt) -> None:
        overrides = _overrides(sets, output_dir, max_steps, learning_rate, seed, plot, resume)
        if model_forward is not None:
            overrides["model_forward"] = model_forward
        _run(kind, config, overrides, model, dataset, (use_peft, lora_r, lora_alpha, lora_target_modules))

    command.__doc__ = doc
    command.__name__ = f"{kind}_command"
    return command


trainer_commands = {kind: _trainer_command(kind, doc) for kind, doc in TRAINER_COMMANDS.items()}
"""`alignlings train dpo|reward|grpo`, registered by cli/app.py."""


def demo_command(
    output_dir: Path = typer.Option(Path("runs/demo"), "--output-dir", "-o", help="Where plots, metrics and results go."),
    quick: bool = typer.Option(False, "--quick", help="The reduced sizes the tests use (about a minute)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the task split, the model and every stage."),
) -> None:
    """The toy addition task end to end: warm-up, reward model, DPO and GRPO, with plots and a results table."""
    from alignlings.trainers.demo import run_demo

    run_demo(output_dir, quick=quick, seed=seed)
