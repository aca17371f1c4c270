"""GRPO's lean KV-cache sampler against transformers' ``generate``, and the EOS ids GRPO stops at.

``sample_with_cache`` must draw the very tokens ``generate`` draws from the same RNG state (same
model, prompts and settings), on an absolute-position model (GPT-2) and a rotary one (Llama), with
left-padded prompts of different lengths, temperature, top-k, top-p and several EOS ids.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from alignlings.trainers import GRPOConfig, GRPOTrainer, toy  # noqa: E402
from alignlings.trainers.data import left_pad_prompts  # noqa: E402
from alignlings.trainers.modeling import eos_token_ids, sample_with_cache  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

V, PAD, EOS, EXTRA_EOS = 96, 0, 1, 2  # more than transformers' default top-k of 50, so an unwanted top-k shows


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=V, n_positions=64, n_embd=32, n_layer=2, n_head=2,
                                      eos_token_id=EOS, bos_token_id=EOS, pad_token_id=PAD)).eval()


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                                        pad_token_id=PAD, eos_token_id=EOS, bos_token_id=EOS)).eval()


PROMPTS = [[5, 6, 7], [8, 9], [10, 11, 12, 13], [14]] * 4  # left-padded to different lengths


@pytest.mark.parametrize("make", [gpt2, llama], ids=["gpt2", "llama"])
@pytest.mark.parametrize("temperature, top_k, top_p", [(1.0, 0, 1.0), (0.7, 5, 0.9), (1.3, 0, 0.8)])
def test_same_tokens_as_generate(make, temperature, top_k, top_p):
    from transformers import GenerationConfig

    model = make()
    ids, mask = left_pad_prompts(PROMPTS, PAD)
    config = GenerationConfig(do_sample=True, max_new_tokens=12, temperature=temperature, top_k=top_k,  # 0 as TRL
                              top_p=top_p, pad_token_id=PAD, eos_token_id=[EOS, EXTRA_EOS], bos_token_id=EOS)
    for seed in (3, 4):
        torch.manual_seed(seed)
        expected = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)[:, ids.shape[1]:]
        torch.manual_seed(seed)
        got = sample_with_cache(model, ids, mask, max_new_tokens=12, temperature=temperature, top_k=top_k,
                                top_p=top_p, eos_ids=[EOS, EXTRA_EOS], pad_id=PAD)
        assert got.shape == expected.shape
        assert torch.equal(got, expected)
    assert not got.is_inference()  # usable in a later forward with gradient


def _force_token(model, token, rows):
    """Make ``model`` put all its probability on ``token`` for the batch rows ``rows``."""
    def hook(module, inputs, output):
        output = output.clone()
        output[rows, :, token] = 1e4
        return output
    return model.lm_head.register_forward_hook(hook)


def test_rows_end_at_any_eos_and_the_loop_stops_when_all_have():
    model = gpt2()
    ids, mask = left_pad_prompts(PROMPTS, PAD)
    handle = _force_token(model, EXTRA_EOS, slice(0, 4))  # rows 0-3 end on their first token
    torch.manual_seed(0)
    out = sample_with_cache(model, ids, mask, max_new_tokens=6, eos_ids=[EOS, EXTRA_EOS], pad_id=PAD)
    handle.remove()
    assert out.shape == (16, 6)  # the other rows (nearly surely) run to max_new_tokens
    assert (out[:4, 0] == EXTRA_EOS).all() and (out[:4, 1:] == PAD).all()
    handle = _force_token(model, EXTRA_EOS, slice(None))  # every row ends at once: one step only
    out = sample_with_cache(model, ids, mask, max_new_tokens=6, eos_ids=[EOS, EXTRA_EOS], pad_id=PAD)
    handle.remove()
    assert out.tolist() == [[EXTRA_EOS]] * 16


def test_grpo_stops_at_the_generation_configs_extra_eos_ids(tmp_path):
    tok = toy.make_tokenizer()
    model = toy.make_model(tok, n_layer=1, n_embd=16, n_head=2)
    extra = tok.convert_tokens_to_ids("=")
    model.generation_config.eos_token_id = [tok.eos_token_id, extra]  # as Llama 3 / Qwen declare <|eot_id|>
    assert eos_token_ids(tok, model) == [tok.eos_token_id, extra]
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=8, num_generations=4,
                      max_completion_length=6, max_steps=1, disable_tqdm=True, save_steps=0, save_final_model=False)
    rows = [{"prompt": f"{a}+{a}="} for a in range(4)]
    trainer = GRPOTrainer(model, lambda prompts, completions, **kw: [0.0] * len(prompts), args=args,
                          train_dataset=rows, processing_class=tok)
    torch.manual_seed(0)
    batch = trainer.generate([0, 1])
    ids, lengths = batch["completion_ids"], batch["lengths"]
    for row, n in zip(ids.tolist(), lengths.tolist()):
        stops = [i for i, t in enumerate(row) if t in (tok.eos_token_id, extra)]
        assert n == (stops[0] + 1 if stops else len(row))
    assert any(extra in row[:n] for row, n in zip(ids.tolist(), lengths.tolist()))  # some row ended on "="


@pytest.mark.parametrize("top_k", [0, 7])
def test_grpo_cache_and_generate_backends_draw_the_same_batch(tmp_path, top_k):
    """Both backends draw the same completions. The model's vocabulary (128) is larger than
    transformers' default top-k of 50, and its logits are spread (temperature 3) so that tokens past
    the 50 likeliest get drawn: a ``generate`` that filled in top-k 50 for TRL's ``top_k=0`` differs."""
    tok = toy.make_tokenizer()
    rows = [{"prompt": p} for p in ("1+2=", "10+5=", "7+7=", "99+1=")]
    batches = []
    for backend in ("cache", "generate"):
        args = GRPOConfig(output_dir=str(tmp_path / backend), per_device_train_batch_size=16, num_generations=8,
                          max_completion_length=8, max_steps=1, disable_tqdm=True, save_steps=0,
                          save_final_model=False, temperature=3.0, top_p=1.0, top_k=top_k, generation_backend=backend)
        model = toy.make_model(tok, n_layer=1, n_embd=16, n_head=2)
        model.resize_token_embeddings(128)
        model.generation_config.eos_token_id = tok.eos_token_id
        trainer = GRPOTrainer(model, lambda prompts, **kw: [0.0] * len(prompts),
                              args=args, train_dataset=rows, processing_class=tok)
        torch.manual_seed(5)
        batches.append(trainer.generate([0, 2]))
    for key in ("input_ids", "attention_mask", "completion_mask", "completion_ids"):
        assert torch.equal(batches[0][key], batches[1][key]), key
    if top_k == 0:  # the draws reach the added rows: spread enough that a hidden top-k of 50 would show
        assert (batches[0]["completion_ids"] >= len(tok)).any()
