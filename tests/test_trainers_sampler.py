"""GRPO's lean KV-cache sampler against transformers' ``generate``, and the EOS ids GRPO stops at.

With ``draw="multinomial"`` (``generation_backend="cache_exact"``) ``sample_with_cache`` must draw
the very tokens ``generate`` draws from the same RNG state (same model, prompts and settings), on an
absolute-position model (GPT-2) and a rotary one (Llama), with left-padded prompts of different
lengths, temperature, top-k, top-p and several EOS ids. With the default ``draw="cdf"`` (inverse
transform sampling) it must draw from the same distribution: frequencies against the filtered
softmax of the model's own logits, and never a token that top-k / top-p removed.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from alignlings.trainers import GRPOConfig, GRPOTrainer, toy  # noqa: E402
from alignlings.trainers.data import left_pad_prompts  # noqa: E402
from alignlings.trainers.modeling import (  # noqa: E402
    draw_tokens, eos_token_ids, filter_logits, sample_with_cache,
)

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
                                top_p=top_p, eos_ids=[EOS, EXTRA_EOS], pad_id=PAD, draw="multinomial")
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
def test_grpo_cache_exact_and_generate_backends_draw_the_same_batch(tmp_path, top_k):
    """Both backends draw the same completions. The model's vocabulary (128) is larger than
    transformers' default top-k of 50, and its logits are spread (temperature 3) so that tokens past
    the 50 likeliest get drawn: a ``generate`` that filled in top-k 50 for TRL's ``top_k=0`` differs."""
    tok = toy.make_tokenizer()
    rows = [{"prompt": p} for p in ("1+2=", "10+5=", "7+7=", "99+1=")]
    batches = []
    for backend in ("cache_exact", "generate"):
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


def _assert_frequencies(draws: torch.Tensor, probs: torch.Tensor) -> None:
    """``draws`` [N] follow ``probs`` [V]: every count within 5 binomial standard deviations (+1) of
    N p, and no draw where p is 0."""
    N = draws.numel()
    counts = torch.bincount(draws, minlength=probs.numel()).double()
    expected = N * probs.double()
    assert (counts[probs == 0] == 0).all(), "a token of probability 0 was drawn"
    bound = 5 * (expected * (1 - probs.double())).sqrt() + 1
    assert ((counts - expected).abs() <= bound).all(), (counts - expected).abs().max()


def test_cdf_draws_follow_the_probabilities():
    """One uniform per row, inverse CDF: the drawn tokens follow each row's probabilities (rows need
    not sum to 1), zeros anywhere (first, last, runs in the middle) are never drawn."""
    torch.manual_seed(0)
    probs = torch.tensor([
        [0.0, 0.5, 0.0, 0.0, 0.25, 0.25, 0.0],
        [3.0, 0.0, 1.0, 0.0, 0.0, 0.0, 4.0],  # unnormalised
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
    ])
    N = 40_000
    for row in probs:
        draws = draw_tokens(row.expand(N, -1).contiguous())
        _assert_frequencies(draws, row / row.sum())


@pytest.mark.parametrize("make", [gpt2, llama], ids=["gpt2", "llama"])
@pytest.mark.parametrize("temperature, top_k, top_p", [(1.0, 0, 1.0), (0.7, 5, 0.9), (1.3, 0, 0.8)])
def test_cdf_sampler_draws_the_filtered_softmax(make, temperature, top_k, top_p):
    """The default sampler's first and second tokens, drawn for many copies of one prompt, follow the
    temperature / top-k / top-p softmax of the model's own logits (``forward``)."""
    model = make()
    N = 6000
    prompt = torch.tensor([[5, 6, 7]])
    ids, mask = prompt.expand(N, -1).contiguous(), torch.ones(N, 3, dtype=torch.long)
    torch.manual_seed(1)
    out = sample_with_cache(model, ids, mask, max_new_tokens=2, temperature=temperature, top_k=top_k, top_p=top_p,
                            pad_id=PAD)
    assert out.shape == (N, 2) and not out.is_inference()
    with torch.no_grad():
        first = model(input_ids=prompt).logits[0, -1].float()
        probs = torch.softmax(filter_logits(first[None], temperature, top_k, top_p), -1)[0]
        _assert_frequencies(out[:, 0], probs)
        # the second token after the likeliest first one, from all rows that drew it
        token = int(torch.bincount(out[:, 0]).argmax())
        rows = out[:, 0] == token
        second = model(input_ids=torch.cat([prompt, torch.tensor([[token]])], 1)).logits[0, -1].float()
        probs = torch.softmax(filter_logits(second[None], temperature, top_k, top_p), -1)[0]
        _assert_frequencies(out[rows, 1], probs)


@pytest.mark.parametrize("dropout", [0.0, 0.5])
def test_sampling_runs_in_the_models_mode_as_trls_generate_and_keeps_it(dropout):
    """TRL 1.16's GRPO calls ``generate`` on the model in training mode, so an active dropout acts
    while sampling. Ours samples in the model's own mode too: without dropout training and eval mode
    draw the same tokens (the lean decoder, no mode switch); with dropout the training-mode draws are
    ``generate``'s in training mode for the same seed (``draw="multinomial"``), not eval mode's. The
    mode is left as it was."""
    from transformers import GenerationConfig

    torch.manual_seed(0)
    model = GPT2LMHeadModel_with_dropout(dropout)
    ids, mask = left_pad_prompts(PROMPTS, PAD)
    config = GenerationConfig(do_sample=True, max_new_tokens=6, temperature=1.5, top_k=0, top_p=1.0,
                              pad_token_id=PAD, eos_token_id=[EOS], bos_token_id=EOS)
    draws = []
    for training in (True, False):
        model.train(training)
        torch.manual_seed(2)
        draws.append(sample_with_cache(model, ids, mask, max_new_tokens=6, temperature=1.5, pad_id=PAD,
                                       eos_ids=[EOS], draw="multinomial"))
        assert model.training == training
        assert all(m.training == training for m in model.modules())
        torch.manual_seed(2)
        expected = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)[:, ids.shape[1]:]
        assert torch.equal(draws[-1], expected), training
    assert torch.equal(draws[0], draws[1]) == (dropout == 0.0)


def GPT2LMHeadModel_with_dropout(dropout: float):
    from transformers import GPT2Config, GPT2LMHeadModel

    return GPT2LMHeadModel(GPT2Config(vocab_size=V, n_positions=64, n_embd=32, n_layer=2, n_head=2,
                                      resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout))


def test_unknown_draw_is_refused():
    ids, mask = left_pad_prompts(PROMPTS, PAD)
    with pytest.raises(ValueError, match="draw"):
        sample_with_cache(gpt2(), ids, mask, max_new_tokens=2, draw="gumbel")
