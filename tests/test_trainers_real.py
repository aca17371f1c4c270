"""What training a real model needs: PEFT LoRA (reference = adapters disabled), bf16 autocast,
gradient checkpointing, and the GPU path when there is one. Tiny Llama / GPT-2 configs, CPU."""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("transformers")

from alignlings.trainers import (  # noqa: E402
    DPOConfig, DPOTrainer, GRPOConfig, GRPOTrainer, RewardConfig, RewardTrainer, toy,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PAIRS = [
    {"prompt": "1+2=", "chosen": "3", "rejected": "4"},
    {"prompt": "10+5=", "chosen": "15", "rejected": "16"},
    {"prompt": "7+7=", "chosen": "14", "rejected": "41"},
    {"prompt": "9+90=", "chosen": "99", "rejected": "98"},
]
PROMPTS = [{"prompt": r["prompt"]} for r in PAIRS]


@pytest.fixture(scope="module")
def tok():
    return toy.make_tokenizer()


def llama(tok, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                        num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                        max_position_embeddings=32, pad_token_id=tok.pad_token_id,
                                        eos_token_id=tok.eos_token_id, bos_token_id=tok.eos_token_id))


def common(tmp_path, **kw):
    base = dict(output_dir=str(tmp_path), logging_steps=1, save_steps=0, disable_tqdm=True,
                save_final_model=False, lr_scheduler_type="constant", per_device_train_batch_size=4)
    base.update(kw)
    return base


def ones(prompts, completions, **kw):
    return [float(c.count("1")) for c in completions]


def varied(prompts, completions, **kw):
    """A reward that differs between almost any two completions, so a group's advantages are not all
    zero whatever tokens the sampler draws (``ones`` is 0 for every completion without a "1")."""
    return [float(sum(map(ord, c)) % 7) for c in completions]


# -- PEFT LoRA -------------------------------------------------------------------------------------



def lora():
    peft = pytest.importorskip("peft")
    return peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)


def test_dpo_lora_trains_adapters_and_uses_the_base_as_reference(tok, tmp_path):
    model = llama(tok)
    base = {k: v.clone() for k, v in model.state_dict().items()}
    args = DPOConfig(**common(tmp_path, learning_rate=3e-2, max_steps=10, beta=0.5))
    trainer = DPOTrainer(model, args=args, train_dataset=PAIRS, processing_class=tok, peft_config=lora())
    assert trainer.ref_model is None and trainer.ref_is_base  # no second copy
    trainable = {n for n, p in trainer.unwrapped_model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    history = trainer.train()
    assert history[0]["loss"] == pytest.approx(math.log(2), abs=1e-6)  # LoRA B = 0: policy == reference
    assert history[-1]["loss"] < history[0]["loss"] - 0.05
    # the base weights did not move; the reference (adapters off) is still the original network
    with trainer.unwrapped_model.disable_adapter():
        for name, value in trainer.unwrapped_model.get_base_model().state_dict().items():
            if "lora_" not in name and name.replace("base_layer.", "") in base:
                assert torch.equal(value, base[name.replace("base_layer.", "")]), name
    assert history[-1]["rewards/margins"] > 0


def test_grpo_lora_reference_is_the_base(tok, tmp_path):
    args = GRPOConfig(**common(tmp_path, learning_rate=1e-2, max_steps=2, per_device_train_batch_size=8,
                               num_generations=4, max_completion_length=3, beta=0.1, num_iterations=2))
    trainer = GRPOTrainer(llama(tok), varied, args=args, train_dataset=PROMPTS, processing_class=tok,
                          peft_config=lora())
    assert trainer.ref_model is None and trainer.ref_is_base
    history = trainer.train()
    assert history[0]["kl"] == pytest.approx(0.0, abs=1e-7)  # adapters start at zero
    assert history[1]["kl"] > 0  # after one step the adapted policy has left its base


def test_reward_lora_keeps_the_head_trainable(tok, tmp_path):
    args = RewardConfig(**common(tmp_path, learning_rate=1e-2, max_steps=8))
    trainer = RewardTrainer(llama(tok), args=args, train_dataset=PAIRS, processing_class=tok, peft_config=lora())
    trainable = {n for n, p in trainer.unwrapped_model.named_parameters() if p.requires_grad}
    assert "value_head.weight" in trainable and all("lora_" in n or n.startswith("value_head") for n in trainable)
    history = trainer.train()
    assert history[-1]["loss"] < history[0]["loss"]


def test_peft_config_must_be_a_peft_config(tok, tmp_path):
    pytest.importorskip("peft")
    with pytest.raises(ValueError, match="peft_config"):
        DPOTrainer(llama(tok), args=DPOConfig(**common(tmp_path, max_steps=1)), train_dataset=PAIRS,
                   processing_class=tok, peft_config={"r": 4})


@pytest.mark.parametrize("trainer_cls", ["dpo", "grpo"])
def test_lora_runs_are_reproducible_with_the_seed(tok, tmp_path, trainer_cls):
    """The adapters' initial weights come from the seed (set before ``get_peft_model``, as TRL does),
    not from whatever the global RNG held before the trainer was made."""
    adapters = []
    for i, disturb in enumerate((1, 2)):
        model = llama(tok)
        torch.manual_seed(disturb)  # a different global RNG state before each trainer
        if trainer_cls == "dpo":
            trainer = DPOTrainer(model, args=DPOConfig(**common(tmp_path / str(i), max_steps=1, seed=7)),
                                 train_dataset=PAIRS, processing_class=tok, peft_config=lora())
        else:
            args = GRPOConfig(**common(tmp_path / str(i), max_steps=1, seed=7, per_device_train_batch_size=8,
                                       num_generations=4, max_completion_length=3))
            trainer = GRPOTrainer(model, ones, args=args, train_dataset=PROMPTS, processing_class=tok,
                                  peft_config=lora())
        adapters.append({n: p.detach().clone() for n, p in trainer.unwrapped_model.named_parameters() if "lora_" in n})
    assert adapters[0] and adapters[0].keys() == adapters[1].keys()
    for name in adapters[0]:
        assert torch.equal(adapters[0][name], adapters[1][name]), name


@pytest.mark.parametrize("make_config", ["PromptTuningConfig", "PrefixTuningConfig", "PromptEncoderConfig"])
def test_prompt_learning_configs_are_refused_up_front(tok, tmp_path, make_config):
    peft = pytest.importorskip("peft")
    config = getattr(peft, make_config)(task_type="CAUSAL_LM", num_virtual_tokens=4)
    with pytest.raises(ValueError, match="peft_config: .*prompt-learning"):
        DPOTrainer(llama(tok), args=DPOConfig(**common(tmp_path, max_steps=1)), train_dataset=PAIRS,
                   processing_class=tok, peft_config=config)
    with pytest.raises(ValueError, match="peft_config: .*prompt-learning"):
        GRPOTrainer(llama(tok), ones, args=GRPOConfig(**common(tmp_path, max_steps=1, per_device_train_batch_size=8,
                                                               num_generations=4)),
                    train_dataset=PROMPTS, processing_class=tok, peft_config=config)
    wrapped = peft.get_peft_model(llama(tok), config)  # a prompt-learning PeftModel passed as the model
    with pytest.raises(ValueError, match="model: .*prompt-learning"):
        DPOTrainer(wrapped, args=DPOConfig(**common(tmp_path, max_steps=1)), train_dataset=PAIRS,
                   processing_class=tok)


# -- bf16 and gradient checkpointing -----------------------------------------------------------------


def test_bf16_autocasts_forward_passes_and_keeps_float32_weights(tok, tmp_path):
    args = DPOConfig(**common(tmp_path, learning_rate=3e-3, max_steps=8, bf16=True, beta=0.5))
    trainer = DPOTrainer(llama(tok), args=args, train_dataset=PAIRS, processing_class=tok)
    batch = trainer.collate([0, 1])
    with trainer.autocast():
        _, _, logits = trainer.sequence_logps(trainer.model, batch)
    assert logits.dtype == torch.bfloat16
    history = trainer.train()
    assert all(p.dtype == torch.float32 for p in trainer.unwrapped_model.parameters())
    assert all(math.isfinite(r["loss"]) for r in history)
    assert history[-1]["loss"] < history[0]["loss"]


def test_gradient_checkpointing_changes_memory_not_results(tok, tmp_path):
    runs = []
    for checkpointing in (False, True):
        args = DPOConfig(**common(tmp_path / str(checkpointing), learning_rate=3e-3, max_steps=3,
                                  gradient_checkpointing=checkpointing))
        trainer = DPOTrainer(llama(tok), args=args, train_dataset=PAIRS, processing_class=tok)
        m = trainer.unwrapped_model
        flag = m.is_activation_checkpointing if hasattr(m, "is_activation_checkpointing") else m.is_gradient_checkpointing
        assert flag == checkpointing
        runs.append(([r["loss"] for r in trainer.train()], trainer.unwrapped_model.state_dict()))
    assert runs[0][0] == pytest.approx(runs[1][0], abs=1e-6)
    for k, v in runs[0][1].items():
        torch.testing.assert_close(v, runs[1][1][k], atol=1e-6, rtol=0)


def test_gradient_checkpointing_with_lora(tok, tmp_path):
    args = GRPOConfig(**common(tmp_path, learning_rate=1e-2, max_steps=1, per_device_train_batch_size=8,
                               num_generations=4, max_completion_length=3, gradient_checkpointing=True))
    history = GRPOTrainer(llama(tok), varied, args=args, train_dataset=PROMPTS, processing_class=tok,
                          peft_config=lora()).train()
    assert history[0]["grad_norm"] > 0  # gradients reach the adapters through the checkpointed layers


# -- the GPU path -----------------------------------------------------------------------------------


@pytest.mark.needs_cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU on this machine")
def test_cuda_is_the_default_device_and_trains(tok, tmp_path):
    args = DPOConfig(**common(tmp_path, learning_rate=3e-3, max_steps=4, bf16=True))
    trainer = DPOTrainer(llama(tok), args=args, train_dataset=PAIRS, processing_class=tok)
    assert trainer.device.type == "cuda" and next(trainer.unwrapped_model.parameters()).is_cuda
    history = trainer.train()
    assert history[-1]["loss"] < history[0]["loss"]
    args = GRPOConfig(**common(tmp_path / "g", learning_rate=1e-2, max_steps=2, per_device_train_batch_size=8,
                               num_generations=4, max_completion_length=3))
    assert len(GRPOTrainer(llama(tok), ones, args=args, train_dataset=PROMPTS, processing_class=tok).train()) == 2


def test_lora_gpt2_scores_left_padded_rows_at_their_sampled_positions(tok, tmp_path):
    # a PeftModel's forward hides position_ids in **kwargs: they must still reach GPT-2 (absolute
    # positions), or the kept log-probs of left-padded rows would not be those they were sampled with
    peft = pytest.importorskip("peft")
    from alignlings.trainers.modeling import lm_logits

    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn"], lora_dropout=0.0, fan_in_fan_out=True)
    args = GRPOConfig(**common(tmp_path, max_steps=1, per_device_train_batch_size=8, num_generations=4,
                               max_completion_length=3, num_iterations=2))
    trainer = GRPOTrainer(toy.make_model(tok, n_layer=1, n_embd=32, n_head=2), ones, args=args,
                          train_dataset=PROMPTS, processing_class=tok, peft_config=config)
    batch = trainer.generate_and_score([0, 3])  # "1+2=" and "9+90=": different lengths, left-padded
    assert batch["attention_mask"][:, 0].eq(0).any()
    for row in range(8):
        keep = batch["attention_mask"][row].bool()
        ids = batch["input_ids"][row][keep].unsqueeze(0)
        logits = lm_logits(trainer.model, ids, torch.ones_like(ids))
        n = int(batch["completion_mask"][row].sum())
        logp = torch.log_softmax(logits[0, -n - 1:-1], -1).gather(-1, ids[0, -n:].unsqueeze(-1)).squeeze(-1)
        torch.testing.assert_close(batch["old_logps"][row][:n], logp, atol=1e-5, rtol=0)
