"""Issue 35: the settings TRL 1.16's users change behave as in TRL, a stock path on request, no
silent drift (the lean decoder's tested transformers range, the optimiser's tested torch range,
an opt-in check of the lean path against ``forward``)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from alignlings.trainers import GRPOConfig, GRPOTrainer, toy  # noqa: E402
from alignlings.trainers.data import completion_mask_until_eos  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _trl_truncated(completion_ids: torch.Tensor, mask: torch.Tensor, eos_ids: list[int], pad_id: int) -> list[bool]:
    """TRL 1.16's GRPOTrainer rule, written as it is there: the kept ids' last is not EOS or pad."""
    eos_and_pad = [*eos_ids, pad_id]
    kept = [c[m.bool()].tolist() for c, m in zip(completion_ids, mask)]
    return [ids[-1] not in eos_and_pad for ids in kept]


def test_truncated_follows_trls_rule_when_the_pad_id_is_an_ordinary_token():
    PAD, EOS = 0, 1
    torch.manual_seed(0)
    ids = torch.randint(0, 6, (200, 5))
    ids[:4] = torch.tensor([[3, 4, 5, 2, PAD], [3, PAD, 4, 5, 2], [3, EOS, PAD, PAD, PAD], [PAD] * 5])
    mask, truncated = completion_mask_until_eos(ids, [EOS], pad_id=PAD)
    assert truncated.tolist() == _trl_truncated(ids, mask, [EOS], PAD)
    assert truncated[:4].tolist() == [False, True, False, False]


def _forced_pad_trainer(tmp_path, **kw):
    tok = toy.make_tokenizer()
    model = toy.make_model(tok, n_layer=1, n_embd=16, n_head=2)
    pad = tok.pad_token_id
    assert pad != tok.eos_token_id

    def hook(module, inputs, output):  # rows 0-3 always draw the pad token: never an EOS
        output = output.clone()
        output[:4, :, pad] = 1e4
        return output

    model.lm_head.register_forward_hook(hook)
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=8, num_generations=4,
                      max_completion_length=4, max_steps=1, disable_tqdm=True, save_steps=0,
                      save_final_model=False, **kw)
    rows = [{"prompt": f"{a}+{a}="} for a in range(4)]
    return GRPOTrainer(model, lambda prompts, **k: [0.0] * len(prompts), args=args, train_dataset=rows,
                       processing_class=tok), tok


@pytest.mark.parametrize("backend", ["cache", "generate"])
def test_grpo_does_not_call_a_completion_ending_in_the_pad_token_truncated(tmp_path, backend):
    trainer, tok = _forced_pad_trainer(tmp_path, mask_truncated_completions=True, generation_backend=backend)
    torch.manual_seed(0)
    batch = trainer.generate([0, 1])
    C = batch["completion_ids"].shape[1]
    assert (batch["completion_ids"][:4] == tok.pad_token_id).all() and C == 4
    expected = _trl_truncated(batch["completion_ids"], batch["attention_mask"][:, -C:], trainer.eos_ids,
                              tok.pad_token_id)
    assert batch["truncated"].tolist() == expected
    assert not batch["truncated"][:4].any()
    assert (batch["completion_mask"][:4, -C:] == 1).all()  # kept in the loss, as TRL keeps them


# -- the decoder plan reads what forward reads, at each pass -------------------------------------------


def _decode_models():
    import test_trainers_decode as d  # the decoder tests' tiny GPT-2 and Llama

    return d


def _lean_and_forward(model, ids, mask):
    from alignlings.trainers.modeling import lm_logits, position_ids

    with torch.inference_mode():
        lean = lm_logits(model, ids, mask, lean=True).float()
        full = model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask)).logits.float()
    return lean, full


@pytest.mark.parametrize("what", ["eps", "scaling"])
def test_gpt2_values_changed_after_the_first_pass_act_on_the_lean_path(what):
    """A GPT-2's LayerNorm ``eps`` (or its attention ``scaling``) changed after the decoder's plan was
    made: the next lean pass, scoring and sampling, gives what ``forward`` now gives."""
    from alignlings.trainers.decode import lean_decoder
    from alignlings.trainers.modeling import position_ids

    d = _decode_models()
    model = d.gpt2()
    ids, mask = d._right_padded_rows()
    real = mask.bool()
    before, _ = _lean_and_forward(model, ids, mask)  # the plan is made here
    for m in model.modules():
        if what == "eps" and isinstance(m, torch.nn.LayerNorm):
            m.eps = 5.0
        if what == "scaling" and type(m).__name__ == "GPT2Attention":
            m.scaling = 50.0
    lean, full = _lean_and_forward(model, ids, mask)
    assert (full[real] - before[real]).abs().max() > 5e-3  # the change does change the model
    torch.testing.assert_close(lean[real], full[real], atol=2e-5, rtol=1e-5)
    # the sampler's cached decoder (left-padded prompts, a prefill and a token step)
    prompts, pmask = d.left_pad_prompts(d.PROMPTS, d.PAD)
    key_mask = torch.cat([pmask, torch.ones(pmask.shape[0], 1, dtype=pmask.dtype)], 1)
    nxt = torch.full((pmask.shape[0], 1), 7)
    with torch.inference_mode():
        decoder = lean_decoder(model, key_mask)
        pos = position_ids(pmask)
        first = decoder.prefill(prompts, pos)[:, -1].float()
        second = decoder.forward(nxt, pos[:, -1:] + 1)[:, -1].float()
        whole = torch.cat([prompts, nxt], 1)
        expected = model(input_ids=whole, attention_mask=key_mask, position_ids=position_ids(key_mask)).logits.float()
    torch.testing.assert_close(first, expected[:, -2], atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(second, expected[:, -1], atol=2e-5, rtol=1e-5)


def test_llama_attention_dropout_set_on_the_modules_sends_training_passes_through_forward():
    """Llama's attention reads ``self.attention_dropout`` (a float on the module), which may be set
    while the config still says 0: in training mode the lean path then gives way to ``forward``, whose
    dropout acts, after a first pass has made the plan; in eval mode it does not act."""
    from alignlings.trainers.decode import lean_decoder
    from alignlings.trainers.modeling import lm_logits, position_ids

    d = _decode_models()
    model = d.llama().train()
    ids, mask = d._right_padded_rows()
    assert model.config.attention_dropout == 0.0
    assert lean_decoder(model, mask, cache=False) is not None  # the plan is made
    with torch.inference_mode():
        lm_logits(model, ids, mask, lean=True)
    for layer in model.model.layers:
        layer.self_attn.attention_dropout = 0.5
    assert lean_decoder(model, mask, cache=False) is None
    with torch.inference_mode():
        torch.manual_seed(3)
        lean = lm_logits(model, ids, mask, lean=True).float()
        torch.manual_seed(3)
        full = model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask)).logits.float()
        torch.manual_seed(4)
        other = model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask)).logits.float()
    assert (other - full).abs().max() > 1e-3  # the dropout does act in forward
    torch.testing.assert_close(lean, full, atol=0, rtol=0)
    model.eval()
    assert lean_decoder(model, mask, cache=False) is not None  # eval mode: no dropout acts


def test_sampling_in_training_mode_suspends_activation_checkpointing_and_restores_it():
    """As TRL's ``unwrap_model_for_generation``: checkpointing is off while sampling (a checkpointed
    layer in training mode would drop the KV cache), and on again afterwards."""
    from alignlings.trainers.data import left_pad_prompts
    from alignlings.trainers.modeling import sample_with_cache

    tok = toy.make_tokenizer()
    model = toy.make_model(tok, n_layer=2, n_embd=16, n_head=2).train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    flagged = [m for m in model.modules() if m.__dict__.get("gradient_checkpointing") is True]
    assert flagged
    ids, mask = left_pad_prompts([[3, 4, 5], [6, 7]], tok.pad_token_id)
    out = []
    for lean in (True, False):
        torch.manual_seed(0)
        out.append(sample_with_cache(model, ids, mask, max_new_tokens=5, pad_id=tok.pad_token_id, lean=lean,
                                     draw="multinomial"))
        assert all(m.gradient_checkpointing for m in flagged)
    assert torch.equal(out[0], out[1])


# -- min_p and repetition_penalty (TRL 1.16 GRPOConfig fields) -------------------------------------------


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
@pytest.mark.parametrize("temperature, top_k, top_p, min_p, penalty",
                         [(1.0, 0, 1.0, 0.05, 1.0), (1.0, 0, 1.0, None, 1.8), (1.4, 5, 0.9, 0.1, 0.6),
                          (0.8, 0, 1.0, 0.2, 1.3)])
def test_min_p_and_repetition_penalty_draw_generates_tokens(arch, temperature, top_k, top_p, min_p, penalty):
    """The fast sampler with ``draw="multinomial"`` draws the very tokens ``generate`` draws with the
    same ``min_p`` and ``repetition_penalty`` (left-padded prompts: transformers 5 penalizes no pad)."""
    from transformers import GenerationConfig

    import test_trainers_sampler as s
    from alignlings.trainers.data import left_pad_prompts
    from alignlings.trainers.modeling import sample_with_cache

    model = s.gpt2() if arch == "gpt2" else s.llama()
    ids, mask = left_pad_prompts(s.PROMPTS, s.PAD)
    config = GenerationConfig(do_sample=True, max_new_tokens=10, temperature=temperature, top_k=top_k, top_p=top_p,
                              min_p=min_p, repetition_penalty=penalty, pad_token_id=s.PAD,
                              eos_token_id=[s.EOS, s.EXTRA_EOS], bos_token_id=s.EOS)
    for seed in (3, 4):
        torch.manual_seed(seed)
        expected = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)[:, ids.shape[1]:]
        torch.manual_seed(seed)
        got = sample_with_cache(model, ids, mask, max_new_tokens=10, temperature=temperature, top_k=top_k,
                                top_p=top_p, min_p=min_p, repetition_penalty=penalty,
                                eos_ids=[s.EOS, s.EXTRA_EOS], pad_id=s.PAD, draw="multinomial")
        assert torch.equal(got, expected), seed


def test_repetition_penalty_and_min_p_are_transformers_processors():
    from transformers.generation.logits_process import MinPLogitsWarper, RepetitionPenaltyLogitsProcessor

    from alignlings.trainers.modeling import filter_logits, penalize_repeats

    torch.manual_seed(0)
    V = 40
    ids = torch.randint(0, V, (6, 9))
    logits = torch.randn(6, V) * 3
    seen = torch.zeros(6, V, dtype=torch.bool).scatter_(1, ids, True)
    expected = RepetitionPenaltyLogitsProcessor(1.7)(ids, logits.clone())
    assert torch.equal(penalize_repeats(logits, seen, 1.7), expected)
    assert torch.equal(filter_logits(logits, 1.0, 0, 1.0, 0.3), MinPLogitsWarper(0.3)(ids, logits.clone()))


def test_grpo_passes_min_p_and_repetition_penalty_to_both_samplers(tmp_path):
    import test_trainers_sampler as s  # noqa: F401  (the fixtures' imports)

    tok = toy.make_tokenizer()
    rows = [{"prompt": p} for p in ("1+2=", "10+5=", "7+7=", "99+1=")]
    batches = []
    for backend in ("cache_exact", "generate"):
        args = GRPOConfig(output_dir=str(tmp_path / backend), per_device_train_batch_size=16, num_generations=8,
                          max_completion_length=8, max_steps=1, disable_tqdm=True, save_steps=0,
                          save_final_model=False, temperature=2.0, min_p=0.05, repetition_penalty=1.5,
                          generation_backend=backend)
        model = toy.make_model(tok, n_layer=1, n_embd=16, n_head=2)
        trainer = GRPOTrainer(model, lambda prompts, **kw: [0.0] * len(prompts), args=args, train_dataset=rows,
                              processing_class=tok)
        torch.manual_seed(5)
        batches.append(trainer.generate([0, 2]))
    assert torch.equal(batches[0]["completion_ids"], batches[1]["completion_ids"])
    with pytest.raises(ValueError, match="min_p"):
        GRPOConfig(min_p=1.5)
    with pytest.raises(ValueError, match="repetition_penalty"):
        GRPOConfig(repetition_penalty=0.0)


# -- §2: the stock path on request, the tested ranges, the drift check ----------------------------------

PAIRS = [{"prompt": f"{a}+{b}=", "chosen": str(a + b), "rejected": str(a + b + 1)} for a, b in
         [(1, 2), (10, 5), (7, 7), (9, 90), (3, 3), (25, 25), (0, 8), (12, 21)]]


def _dpo(tmp_path, name, **kw):
    from alignlings.trainers import DPOConfig, DPOTrainer

    tok = toy.make_tokenizer()
    model = toy.make_model(tok, n_layer=2, n_embd=32, n_head=2, seed=1)
    args = DPOConfig(output_dir=str(tmp_path / name), per_device_train_batch_size=4, max_steps=3, learning_rate=1e-3,
                     logging_steps=1, disable_tqdm=True, save_steps=0, save_final_model=False, **kw)
    return DPOTrainer(model, args=args, train_dataset=PAIRS, processing_class=tok)


def _grpo(tmp_path, name, **kw):
    tok = toy.make_tokenizer()
    model = toy.make_model(tok, n_layer=2, n_embd=32, n_head=2, seed=1)
    args = GRPOConfig(output_dir=str(tmp_path / name), per_device_train_batch_size=8, num_generations=4,
                      max_completion_length=4, max_steps=2, learning_rate=1e-3, logging_steps=1, disable_tqdm=True,
                      save_steps=0, save_final_model=False, **kw)
    return GRPOTrainer(model, lambda completions, **k: [float(len(c)) for c in completions], args=args,
                       train_dataset=[{"prompt": r["prompt"]} for r in PAIRS], processing_class=tok)


@pytest.fixture
def no_lean(monkeypatch):
    """Any use of the lean decoder fails the test."""
    from alignlings.trainers import decode

    def refuse(*a, **k):
        raise AssertionError("the lean decoder was used")

    for cls in (decode.GPT2Decoder, decode.LlamaDecoder):
        monkeypatch.setattr(cls, "__init__", refuse)
        monkeypatch.setattr(cls, "forward", refuse)
    monkeypatch.setattr(decode, "_PLANS", __import__("weakref").WeakKeyDictionary())


def test_model_forward_sends_dpo_through_forward_with_the_same_results(tmp_path, monkeypatch):
    lean = [r["loss"] for r in _dpo(tmp_path, "lean").train()]
    from alignlings.trainers import decode

    def refuse(*a, **k):
        raise AssertionError("the lean decoder was used")

    monkeypatch.setattr(decode.GPT2Decoder, "forward", refuse)
    monkeypatch.setattr(decode, "_PLANS", __import__("weakref").WeakKeyDictionary())
    with pytest.raises(AssertionError, match="lean decoder was used"):  # the patch does catch the lean path
        _dpo(tmp_path, "caught").train()
    stock = [r["loss"] for r in _dpo(tmp_path, "stock", model_forward=True).train()]
    assert stock == pytest.approx(lean, abs=1e-5)


def test_model_forward_sends_grpo_through_forward_and_generate(tmp_path, monkeypatch, no_lean):
    import alignlings.trainers.grpo as grpo

    used = []
    real_sample = grpo.sample
    monkeypatch.setattr(grpo, "sample", lambda *a, **k: used.append(1) or real_sample(*a, **k))
    monkeypatch.setattr(grpo, "sample_with_cache", lambda *a, **k: pytest.fail("the KV-cache sampler was used"))
    history = _grpo(tmp_path, "stock", model_forward=True).train()
    assert len(history) == 2 and used == [1, 1]


def test_the_model_forward_flag_reaches_the_config(tmp_path, monkeypatch, no_lean):
    import json

    from typer.testing import CliRunner

    from alignlings.cli.app import app

    tok = toy.make_tokenizer()
    toy.make_model(tok, n_layer=1, n_embd=32, n_head=2, seed=0).save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in PAIRS))
    config = tmp_path / "dpo.toml"
    config.write_text(f'model = "{tmp_path / "model"}"\ndataset = "{tmp_path / "pairs.jsonl"}"\n[dpo]\n'
                      "per_device_train_batch_size = 4\n")
    base = ["train", "dpo", "--config", str(config), "--max-steps", "1", "--output-dir", str(tmp_path / "out"),
            "--set", "disable_tqdm=true"]
    result = CliRunner().invoke(app, base)
    assert result.exit_code != 0 and "lean decoder was used" in repr(result.exception)
    result = CliRunner().invoke(app, [*base, "--model-forward"])
    assert result.exit_code == 0, result.output + repr(result.exception)


def test_outside_the_tested_transformers_range_the_lean_path_steps_aside_with_one_notice(monkeypatch):
    import transformers

    from alignlings.trainers import versions
    from alignlings.trainers.decode import lean_decoder

    d = _decode_models()
    model = d.gpt2()
    ids, mask = d._right_padded_rows()
    assert versions.in_range(transformers.__version__, versions.TESTED_TRANSFORMERS)  # the installed one ran
    assert lean_decoder(model, mask, cache=False) is not None
    monkeypatch.setattr(transformers, "__version__", "5.99.0")
    monkeypatch.setattr(versions, "_NOTICES", set())
    with pytest.warns(UserWarning, match="tested on transformers") as caught:
        assert lean_decoder(model, mask, cache=False) is None
        assert lean_decoder(model, mask, cache=False) is None
        lean, full = _lean_and_forward(model, ids, mask)
    assert len([w for w in caught if "tested on transformers" in str(w.message)]) == 1
    assert torch.equal(lean, full)  # forward itself
    monkeypatch.setattr(transformers, "__version__", "5.23.9")
    assert lean_decoder(model, mask, cache=False) is None


@pytest.mark.parametrize("version", [None, "2.99.0"], ids=["tested", "outside"])
def test_optimizer_steps_inside_and_outside_the_tested_torch_range(monkeypatch, version):
    """In the tested torch range the direct kernels step (``fused_adamw_step`` True); outside it torch's
    own ``AdamW.step()`` and ``clip_grad_norm_`` (one notice). Either way the parameters are bitwise
    those of a plain torch loop."""
    from alignlings.trainers import optim, versions

    if version is not None:
        monkeypatch.setattr(torch, "__version__", version)
        monkeypatch.setattr(versions, "_NOTICES", set())
    torch.manual_seed(0)
    ours = [torch.nn.Parameter(torch.randn(5, 3)) for _ in range(3)]
    theirs = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    opt_a = torch.optim.AdamW(ours, lr=1e-2, weight_decay=0.1, fused=True)
    opt_b = torch.optim.AdamW(theirs, lr=1e-2, weight_decay=0.1, fused=True)
    direct = []
    import warnings as w

    with w.catch_warnings(record=True) as caught:
        w.simplefilter("always")
        for _ in range(4):
            g = [torch.randn(5, 3) * 3 for _ in ours]
            for p, q, gi in zip(ours, theirs, g):
                p.grad, q.grad = gi.clone(), gi.clone()
            norm_a = optim.clip_grad_norm(ours, 1.0)
            norm_b = torch.nn.utils.clip_grad_norm_(theirs, 1.0)
            assert torch.equal(norm_a, norm_b)
            stepped = optim.fused_adamw_step(opt_a)
            direct.append(stepped)
            if not stepped:
                opt_a.step()
            opt_b.step()
            assert all(torch.equal(p, q) for p, q in zip(ours, theirs))
    notices = [c for c in caught if "direct AdamW step was tested on torch" in str(c.message)]
    if version is None:
        assert direct == [False, True, True, True] and not notices  # the first step creates the state
    else:
        assert direct == [False] * 4 and len(notices) == 1


@pytest.mark.parametrize("trainer", ["dpo", "grpo"])
def test_the_lean_check_stops_on_a_mismatch_and_passes_otherwise(tmp_path, monkeypatch, trainer):
    from alignlings.trainers import decode

    make = _dpo if trainer == "dpo" else _grpo
    assert len(make(tmp_path, "checked", lean_check_steps=1).train()) in (2, 3)  # agrees: no error
    forward = decode.GPT2Decoder.forward

    def drifted(self, *a, **k):  # a lean decoder that no longer reproduces the model
        return forward(self, *a, **k) * 1.1

    monkeypatch.setattr(decode.GPT2Decoder, "forward", drifted)
    assert len(make(tmp_path, "unchecked").train()) in (2, 3)  # opt-in: without the check nothing stops
    with pytest.raises(RuntimeError, match=r"lean_check_steps: at step 0 .* differ from the model's own forward"):
        make(tmp_path, "drifted", lean_check_steps=2).train()
    with pytest.raises(ValueError, match="lean_check_steps"):
        GRPOConfig(lean_check_steps=-1)


def test_prefix_sharing_can_be_turned_off(monkeypatch):
    """``decode.PREFIX_SHARING = False``: every row runs its whole sequence (the benchmark's "sharing
    off" cases, TRL's work); the logits are the same."""
    from alignlings.trainers import decode

    d = _decode_models()
    model = d.gpt2()
    monkeypatch.setattr(decode, "SHARE_MIN_WORK", 0)
    ids, mask = d.left_pad_prompts([p + [20, 21] for p in d.PROMPTS for _ in range(3)], d.PAD)
    calls = []
    real = decode.LeanDecoder.shared_forward
    monkeypatch.setattr(decode.LeanDecoder, "shared_forward", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    with torch.inference_mode():
        shared = decode.lean_logits(model, ids, mask, logits_to_keep=3)
        assert calls == [1]
        monkeypatch.setattr(decode, "PREFIX_SHARING", False)
        assert decode.distinct_rows(ids) is None
        whole = decode.lean_logits(model, ids, mask, logits_to_keep=3)
    assert calls == [1]
    torch.testing.assert_close(whole, shared, atol=2e-5, rtol=1e-5)


def test_the_grpo_lean_check_covers_the_samplers_path(tmp_path, monkeypatch):
    """A drift only in the sampler's cached decoder (its prefill), not in the scoring pass: GRPO's
    check compares the sampler's prefill and first token step too, and stops."""
    from alignlings.trainers import decode

    prefill = decode.LeanDecoder.prefill
    monkeypatch.setattr(decode.LeanDecoder, "prefill", lambda self, *a, **k: prefill(self, *a, **k) * 1.1)
    with pytest.raises(RuntimeError, match=r"lean_check_steps: at step 0 .* differ from the model's own forward"):
        _grpo(tmp_path, "drifted", lean_check_steps=1).train()
    monkeypatch.setattr(decode.LeanDecoder, "prefill", prefill)
    assert len(_grpo(tmp_path, "fine", lean_check_steps=1, generation_backend="cache_exact").train()) == 2
