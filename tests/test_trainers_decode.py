"""The lean decoder (``trainers/decode.py``) against the model's own ``forward``.

Prefill plus token steps through ``LeanDecoder`` must give the logits a full forward over the same
left-padded sequence gives at each new position (GPT-2, Llama with grouped-query attention, Qwen2
with its q/k/v biases, a LoRA-adapted Llama); models and settings it does not cover get no decoder,
and sampling still works through ``forward``. One pass for scoring without gradient (``lean_logits``:
a DPO reference, GRPO's reference and old log-probs) matches ``forward`` on right-padded rows.
Same-tokens-as-``generate`` draws are in
``test_trainers_sampler.py``.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from alignlings.trainers.data import left_pad_prompts  # noqa: E402
from alignlings.trainers.decode import GPT2Decoder, LlamaDecoder, lean_decoder  # noqa: E402
from alignlings.trainers.modeling import position_ids, sample_with_cache  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

V, PAD, EOS = 48, 0, 1
PROMPTS = [[5, 6, 7, 8], [9, 10], [11, 12, 13], [14]]
NEW = 5


@pytest.fixture
def share_always(monkeypatch):
    """Share any repeated prefix, however short (the tests' batches are far under the default)."""
    from alignlings.trainers import decode

    monkeypatch.setattr(decode, "SHARE_MIN_WORK", 0)


def test_short_repeated_prefixes_are_not_shared():
    from alignlings.trainers import decode

    model = gpt2()
    ids, mask = left_pad_prompts([p for p in PROMPTS for _ in range(3)], PAD)  # 8 repeats x 4 tokens
    with torch.inference_mode():
        decoder = lean_decoder(model, torch.cat([mask, torch.ones_like(mask)], 1))
        sizes, forward = [], decoder.forward
        decoder.forward = lambda x, *a, **k: sizes.append(x.shape[0]) or forward(x, *a, **k)
        decoder.prefill(ids, position_ids(mask))
    assert sizes == [ids.shape[0]]
    assert decode.distinct_rows(ids, ids.shape[1]) is None and decode.distinct_rows(ids) is not None


def gpt2(**kw):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=V, n_positions=64, n_embd=32, n_layer=2, n_head=4,
                                      eos_token_id=EOS, pad_token_id=PAD, **kw)).eval()


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                        pad_token_id=PAD, eos_token_id=EOS, bos_token_id=EOS)).eval()


def qwen2(**kw):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                         pad_token_id=PAD, eos_token_id=EOS, bos_token_id=EOS, **kw)).eval()
    with torch.no_grad():  # random, non-zero q/k/v biases (they start at zero)
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.normal_(0, 0.5)
    return model


def qwen2_sliding():
    """Qwen2 with sliding-window layers (window 3, shorter than the test sequences) after the first."""
    return qwen2(use_sliding_window=True, sliding_window=3, max_window_layers=1)


def qwen3():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                         max_position_embeddings=64, pad_token_id=PAD, eos_token_id=EOS,
                                         bos_token_id=EOS)).eval()
    with torch.no_grad():  # the q/k norms' weights start at one: make them matter
        for layer in model.model.layers:
            layer.self_attn.q_norm.weight.normal_(1, 0.5)
            layer.self_attn.k_norm.weight.normal_(1, 0.5)
    return model


def mistral():
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    return MistralForCausalLM(MistralConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                            num_attention_heads=4, num_key_value_heads=2, sliding_window=3,
                                            max_position_embeddings=64, pad_token_id=PAD, eos_token_id=EOS,
                                            bos_token_id=EOS)).eval()


def gemma():
    from transformers import GemmaConfig, GemmaForCausalLM

    torch.manual_seed(0)
    model = GemmaForCausalLM(GemmaConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=1, head_dim=8,
                                         max_position_embeddings=64, pad_token_id=PAD, eos_token_id=EOS,
                                         bos_token_id=EOS)).eval()
    with torch.no_grad():  # Gemma's RMSNorm weights start at zero (it scales by 1 + w)
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(0, 0.5)
    return model


FAMILIES = [(gpt2, GPT2Decoder), (llama, LlamaDecoder), (qwen2, LlamaDecoder), (qwen2_sliding, LlamaDecoder),
            (qwen3, LlamaDecoder), (mistral, LlamaDecoder), (gemma, LlamaDecoder)]
FAMILY_IDS = ["gpt2", "llama", "qwen2", "qwen2-sliding", "qwen3", "mistral-sliding", "gemma"]
MAKERS = [make for make, _ in FAMILIES]


def lora_llama():
    peft = pytest.importorskip("peft")
    model = peft.get_peft_model(llama(), peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():  # LoRA's B starts at zero: give the adapters an effect
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    return model.eval()


def _forward_logits(model, ids, mask):
    """[B, T, V] logits of the model's own forward with the sampler's positions."""
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask)).logits.float()


@pytest.mark.parametrize("padded", [True, False], ids=["padded", "unpadded"])
@pytest.mark.parametrize("make, kind", FAMILIES + [(lora_llama, LlamaDecoder)], ids=FAMILY_IDS + ["lora-llama"])
def test_prefill_and_steps_give_forwards_logits(make, kind, padded):
    """Prompts of different lengths (left-padded: each step's keys masked) and of one length (no
    padded key: the one-token steps attend every key without a mask)."""
    model = make()
    ids, mask = left_pad_prompts(PROMPTS if padded else [p[:1] + [5, 6, 7] for p in PROMPTS], PAD)
    assert bool(mask.all()) != padded
    B, P = ids.shape
    torch.manual_seed(1)
    new = torch.randint(2, V, (B, NEW))  # the tokens fed one by one after the prompt
    full_ids = torch.cat([ids, new], dim=1)
    full_mask = torch.cat([mask, torch.ones_like(new)], dim=1)
    expected = _forward_logits(model, full_ids, full_mask)  # [B, P + NEW, V]
    positions = position_ids(full_mask)
    with torch.inference_mode():
        decoder = lean_decoder(model, full_mask)
        assert isinstance(decoder, kind)
        got = [decoder.forward(ids, positions[:, :P])[:, -1]]
        for t in range(NEW - 1):
            got.append(decoder.forward(new[:, t: t + 1], positions[:, P + t: P + t + 1])[:, -1])
    for t, logits in enumerate(got):
        torch.testing.assert_close(logits, expected[:, P - 1 + t], atol=2e-5, rtol=1e-5, msg=f"position {t}")


@pytest.mark.parametrize("make, kind", FAMILIES, ids=FAMILY_IDS)
def test_a_shared_prefill_computes_each_distinct_prompt_once_and_gives_every_rows_logits(make, kind, share_always):
    model = make()
    G = 3  # GRPO's layout: each prompt G times, adjacent
    ids, mask = left_pad_prompts([p for p in PROMPTS for _ in range(G)], PAD)
    B, P = ids.shape
    torch.manual_seed(1)
    new = torch.randint(2, V, (B, NEW))  # every row its own continuation
    full_ids = torch.cat([ids, new], dim=1)
    full_mask = torch.cat([mask, torch.ones_like(new)], dim=1)
    expected = _forward_logits(model, full_ids, full_mask)  # [B, P + NEW, V]
    positions = position_ids(full_mask)
    with torch.inference_mode():
        decoder = lean_decoder(model, full_mask)
        assert isinstance(decoder, kind)
        seen, forward = [], decoder.forward
        decoder.forward = lambda x, *a, **k: seen.append(x.shape[0]) or forward(x, *a, **k)
        got = [decoder.prefill(ids, positions[:, :P])[:, -1]]
        assert seen == [len(PROMPTS)]  # the distinct prompts only
        for t in range(NEW - 1):
            got.append(decoder.forward(new[:, t: t + 1], positions[:, P + t: P + t + 1])[:, -1])
    assert seen == [len(PROMPTS)] + [B] * (NEW - 1)
    for t, logits in enumerate(got):
        torch.testing.assert_close(logits, expected[:, P - 1 + t], atol=2e-5, rtol=1e-5, msg=f"position {t}")


def test_a_hooked_model_prefills_every_row():
    model = gpt2()
    sizes = []
    handle = model.lm_head.register_forward_hook(lambda m, a, out: sizes.append(out.shape[0]))
    ids, mask = left_pad_prompts([p for p in PROMPTS for _ in range(2)], PAD)
    sample_with_cache(model, ids, mask, max_new_tokens=2, eos_ids=[EOS], pad_id=PAD)
    handle.remove()
    assert sizes[0] == 2 * len(PROMPTS)  # the hook sees the whole batch, as under forward


def test_unsupported_models_and_settings_get_no_decoder_and_still_sample():
    from transformers import Gemma2Config, Gemma2ForCausalLM, GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(0)
    neox = GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                            num_attention_heads=4, max_position_embeddings=64)).eval()
    gemma2 = Gemma2ForCausalLM(Gemma2Config(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                            num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                            max_position_embeddings=64, pad_token_id=PAD, eos_token_id=EOS,
                                            bos_token_id=EOS)).eval()
    ids, mask = left_pad_prompts(PROMPTS, PAD)
    key_mask = torch.ones(ids.shape[0], ids.shape[1] + 3, dtype=torch.long)
    unsupported = [neox, gpt2(reorder_and_upcast_attn=True), gemma2]
    for model in unsupported:
        assert lean_decoder(model, key_mask) is None, type(model).__name__
        out = sample_with_cache(model, ids, mask, max_new_tokens=3, eos_ids=[EOS], pad_id=PAD)
        assert out.shape[0] == ids.shape[0] and 1 <= out.shape[1] <= 3
    assert lean_decoder(gpt2().train(), key_mask) is None  # only in eval mode (no dropout)


def test_lean_and_forward_paths_draw_the_same_tokens():
    for make in MAKERS:
        model = make()
        ids, mask = left_pad_prompts(PROMPTS * 2, PAD)
        draws = []
        for lean in (True, False):
            torch.manual_seed(7)
            draws.append(sample_with_cache(model, ids, mask, max_new_tokens=8, temperature=0.8, top_p=0.9,
                                           eos_ids=[EOS], pad_id=PAD, lean=lean))
        assert torch.equal(draws[0], draws[1]), make.__name__


def test_forward_hooks_still_run():
    model = gpt2()
    calls = []
    handle = model.transformer.h[0].mlp.c_fc.register_forward_hook(lambda m, i, o: calls.append(o.shape))
    ids, mask = left_pad_prompts(PROMPTS, PAD)
    sample_with_cache(model, ids, mask, max_new_tokens=3, pad_id=PAD)
    handle.remove()
    assert len(calls) == 3  # the prefill and two token steps


@pytest.mark.parametrize("make", MAKERS, ids=FAMILY_IDS)
@pytest.mark.parametrize("keep", [0, 3])
def test_one_pass_scoring_gives_forwards_logits_on_right_padded_rows(make, keep):
    from alignlings.trainers.decode import lean_logits
    from alignlings.trainers.modeling import lm_logits

    model = make()
    rows = [[5, 6, 7, 8, 9, 10], [9, 10, 11], [11, 12, 13, 14], [14, 15]]
    T = max(map(len, rows))
    ids = torch.tensor([r + [PAD] * (T - len(r)) for r in rows])  # right-padded, as DPO's batches
    mask = (torch.arange(T)[None, :] < torch.tensor([len(r) for r in rows])[:, None]).long()
    expected = _forward_logits(model, ids, mask)[:, -keep:] if keep else _forward_logits(model, ids, mask)
    with torch.inference_mode():
        got = lean_logits(model, ids, mask, logits_to_keep=keep)
        via = lm_logits(model, ids, mask, logits_to_keep=keep, lean=True)
    real = mask[:, -keep:].bool() if keep else mask.bool()  # padded positions' logits are never read
    torch.testing.assert_close(got[real].float(), expected[real], atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(via, got)


def test_dpo_reference_scores_the_same_through_either_path(tmp_path):
    from alignlings.trainers import DPOConfig, DPOTrainer, toy

    tok = toy.make_tokenizer()
    pairs = [{"prompt": f"{a}+{b}=", "chosen": str(a + b), "rejected": str(a + b + 1)} for a, b in
             [(1, 2), (10, 5), (7, 7), (99, 1)]]
    args = DPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, max_steps=1, disable_tqdm=True,
                     save_steps=0, save_final_model=False)
    trainer = DPOTrainer(toy.make_model(tok, n_layer=2, n_embd=32, n_head=2), args=args, train_dataset=pairs,
                         processing_class=tok)
    batch = trainer.collate([0, 1, 2, 3])
    with torch.inference_mode():
        lean_sum, _, _ = trainer.sequence_logps(trainer.ref_model, batch, lean=True)
        plain_sum, _, _ = trainer.sequence_logps(trainer.ref_model, batch, lean=False)
    torch.testing.assert_close(lean_sum, plain_sum, atol=1e-5, rtol=1e-6)


def test_dpo_scores_each_pairs_prompt_once_with_the_right_padded_passs_values_and_gradients(tmp_path, share_always):
    """DPO's batches align the prompts (left-padded) and the completions (right-padded), so the chosen
    and the rejected row of a pair share the prompt block, which the lean pass runs once; the sums,
    scored logits and gradients equal ``forward`` over the plain right-padded rows."""
    from alignlings.trainers import DPOConfig, DPOTrainer, decode, toy
    from alignlings.trainers.data import collate_sequences

    tok = toy.make_tokenizer()
    pairs = [{"prompt": f"{a}+{b}=", "chosen": str(a + b), "rejected": str(a + b + 10)} for a, b in
             [(1, 2), (10, 5), (7, 7), (99, 1)]]
    args = DPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, max_steps=1, disable_tqdm=True,
                     save_steps=0, save_final_model=False)
    trainer = DPOTrainer(toy.make_model(tok, n_layer=2, n_embd=32, n_head=2), args=args, train_dataset=pairs,
                         processing_class=tok)
    indices = [0, 1, 2, 3]
    aligned = trainer.collate(indices)
    seqs = [trainer.sequences[i][0] for i in indices] + [trainer.sequences[i][1] for i in indices]
    starts = [len(trainer.rows[i]["prompt_chosen"]) for i in indices] + [len(trainer.rows[i]["prompt_rejected"]) for i in indices]
    plain = collate_sequences(seqs, starts, trainer.pad_id)
    assert aligned["input_ids"].shape != plain["input_ids"].shape or not torch.equal(aligned["input_ids"], plain["input_ids"])
    seen = []
    forward = decode.LeanDecoder.shared_forward

    def counting(self, input_ids, positions, first, inverse, keep=1):
        seen.append(len(first))
        return forward(self, input_ids, positions, first, inverse, keep)

    model = trainer.model
    params = [p for p in model.parameters() if p.requires_grad]
    results = []
    for batch, lean in ((aligned, True), (plain, False)):
        model.zero_grad()
        decode.LeanDecoder.shared_forward = counting
        try:
            total, lengths, logits = trainer.sequence_logps(model, batch, lean=lean)
        finally:
            decode.LeanDecoder.shared_forward = forward
        total.sum().backward()
        results.append((total.detach(), lengths, logits.detach(), [p.grad.clone() for p in params]))
    assert seen == [4]  # four distinct prompts for the eight rows, in the aligned pass only
    (a_sum, a_len, a_logits, a_grads), (b_sum, b_len, b_logits, b_grads) = results
    torch.testing.assert_close(a_sum, b_sum, atol=1e-5, rtol=1e-5)
    assert torch.equal(a_len, b_len)
    torch.testing.assert_close(a_logits, b_logits, atol=2e-5, rtol=1e-5)
    for a, b in zip(a_grads, b_grads):
        torch.testing.assert_close(a, b, atol=3e-5, rtol=1e-4)


@pytest.mark.parametrize("make", MAKERS + [lora_llama], ids=FAMILY_IDS + ["lora-llama"])
def test_a_training_pass_gives_forwards_gradients(make):
    """With dropout off (the trainers' ``disable_dropout``) and in training mode, one lean pass gives
    the loss and the gradients of every trainable parameter that ``forward`` gives (Llama's padding
    row of the embedding gets none in either)."""
    from alignlings.trainers.decode import lean_logits
    from alignlings.trainers.modeling import disable_dropout

    model = make()
    disable_dropout(model)
    model.train()
    rows = [[5, 6, 7, 8, 9, PAD], [9, 10, 11, PAD, PAD, PAD], [PAD, 11, 12, 13, 14, 15]]
    ids = torch.tensor(rows)
    mask = (ids != PAD).long()
    params = [p for p in model.parameters() if p.requires_grad]
    grads = []
    for lean in (True, False):
        model.zero_grad()
        if lean:
            logits = lean_logits(model, ids, mask)
            assert logits is not None
        else:
            logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask)).logits
        loss = (logits.float().log_softmax(-1)[..., 3] * mask).sum()
        loss.backward()
        grads.append([p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in params])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, atol=3e-5, rtol=1e-4)
    assert any(g.abs().sum() > 0 for g in grads[0])


@pytest.mark.parametrize("make", MAKERS + [lora_llama], ids=FAMILY_IDS + ["lora-llama"])
def test_grpo_rows_sharing_a_prompt_score_it_once_with_forwards_logits_and_gradients(make, share_always):
    """GRPO's loss pass: G completions of each (left-padded) prompt, scored with ``logits_to_keep`` =
    C + 1. The shared prompt runs once per distinct prompt, and the logits and every gradient equal
    ``forward``'s over the whole rows."""
    from alignlings.trainers import decode
    from alignlings.trainers.modeling import disable_dropout

    model = make()
    disable_dropout(model)
    model.train()
    G, C = 3, 4
    prompts, prompt_mask = left_pad_prompts([p for p in PROMPTS[:3] for _ in range(G)], PAD)
    torch.manual_seed(2)
    completions = torch.randint(2, V, (prompts.shape[0], C))
    completion_mask = torch.ones_like(completions)
    completion_mask[0, 2:] = 0  # a row that ended early: right padding after its EOS
    completions[0, 2:] = PAD
    ids, mask = torch.cat([prompts, completions], 1), torch.cat([prompt_mask, completion_mask], 1)
    params = [p for p in model.parameters() if p.requires_grad]
    seen = []
    forward = decode.LeanDecoder.shared_forward

    def counting(self, input_ids, positions, first, inverse, keep=1):
        seen.append(len(first))
        return forward(self, input_ids, positions, first, inverse, keep)

    grads, outs = [], []
    for lean in (True, False):
        model.zero_grad()
        if lean:
            decode.LeanDecoder.shared_forward = counting
            try:
                logits = decode.lean_logits(model, ids, mask, logits_to_keep=C + 1)
            finally:
                decode.LeanDecoder.shared_forward = forward
        else:
            logits = model(input_ids=ids, attention_mask=mask, position_ids=position_ids(mask)).logits[:, -(C + 1):]
        scored = logits[:, :-1].float().log_softmax(-1).gather(-1, completions[..., None])[..., 0]
        (scored * completion_mask).sum().backward()
        outs.append(logits.detach())
        grads.append([p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in params])
    assert seen == [3]  # the three distinct prompts, not the nine rows
    real = torch.cat([torch.ones_like(completion_mask[:, :1]), completion_mask], 1).bool()  # padded queries: unread
    torch.testing.assert_close(outs[0][real], outs[1][real], atol=2e-5, rtol=1e-5)
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, atol=3e-5, rtol=1e-4)
    assert any(g.abs().sum() > 0 for g in grads[0])


def test_active_dropout_or_checkpointing_uses_forward():
    model = gpt2()  # dropout 0.1
    mask = torch.ones(2, 4, dtype=torch.long)
    assert lean_decoder(model.train(), mask) is None
    from alignlings.trainers.modeling import disable_dropout

    disable_dropout(model)
    assert lean_decoder(model, mask) is not None
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    assert lean_decoder(model, mask) is None


# -- hooks -------------------------------------------------------------------------------------------
# The lean decoder replaces some modules' forward with its own arithmetic (a decoder layer, the
# attention, the model itself). A hook on any of those, or a global module hook, must still act:
# the pass then goes through ``forward``. Each hook below changes the logits, so a lean pass that
# skipped it would differ.


def _shift(output, by=0.5):
    """``output`` (or its first element) plus a ramp over the features (a uniform shift would vanish
    in the next LayerNorm)."""
    first = output[0] if isinstance(output, tuple) else output
    moved = first + by * torch.linspace(-1, 1, first.shape[-1])
    return (moved,) + tuple(output[1:]) if isinstance(output, tuple) else moved


def _layer(model):
    return model.transformer.h[0] if hasattr(model, "transformer") else model.model.layers[0]


def _attention(model):
    return model.transformer.h[0].attn if hasattr(model, "transformer") else model.model.layers[0].self_attn


def _register(model, where):
    from torch.nn.modules import module as module_mod

    layer_cls = type(_layer(model))
    if where == "layer":
        return [_layer(model).register_forward_hook(lambda m, i, o: _shift(o))]
    if where == "layer-pre":
        return [_layer(model).register_forward_pre_hook(lambda m, args: (_shift(args[0]),) + tuple(args[1:]))]
    if where == "attention":
        return [_attention(model).register_forward_hook(lambda m, i, o: _shift(o))]
    if where == "model":
        def double(module, inputs, output):
            output.logits = output.logits * 2
        return [model.register_forward_hook(double)]
    if where == "global":
        return [module_mod.register_module_forward_hook(
            lambda m, i, o: _shift(o) if isinstance(m, layer_cls) else None)]
    if where == "global-pre":
        return [module_mod.register_module_forward_pre_hook(
            lambda m, args: ((_shift(args[0]),) + tuple(args[1:])) if isinstance(m, layer_cls) else None)]
    raise AssertionError(where)


HOOK_PLACES = ["layer", "layer-pre", "attention", "model", "global", "global-pre"]


@pytest.mark.parametrize("make", [gpt2, llama, qwen3], ids=["gpt2", "llama", "qwen3"])
@pytest.mark.parametrize("where", HOOK_PLACES)
def test_hooks_on_modules_the_decoder_replaces_still_act(make, where):
    from alignlings.trainers.modeling import lm_logits

    model = make()
    rows = [[5, 6, 7, 8, 9, 10], [9, 10, 11, PAD, PAD, PAD], [11, 12, 13, 14, PAD, PAD]]
    ids = torch.tensor(rows)
    mask = (ids != PAD).long()
    real = mask.bool()
    plain = _forward_logits(model, ids, mask)
    handles = _register(model, where)
    try:
        hooked = _forward_logits(model, ids, mask)
        assert (hooked[real] - plain[real]).abs().max() > 1e-2  # the hook does change the model
        with torch.inference_mode():
            lean = lm_logits(model, ids, mask, lean=True).float()
        torch.testing.assert_close(lean[real], hooked[real], atol=2e-5, rtol=1e-5)
        # the sampler's decoder honours the same hooks: its draws equal the forward-path sampler's
        prompts, prompt_mask = left_pad_prompts(PROMPTS, PAD)
        draws = []
        for use_lean in (True, False):
            torch.manual_seed(3)
            draws.append(sample_with_cache(model, prompts, prompt_mask, max_new_tokens=4, pad_id=PAD, lean=use_lean))
        assert torch.equal(draws[0], draws[1])
    finally:
        for h in handles:
            h.remove()
    assert lean_decoder(model, mask) is not None  # with the hooks gone, the lean path is back


def test_hooks_the_decoder_calls_keep_the_lean_path():
    """A hook on a module the decoder calls as a module (a projection, a norm, the MLP, the LM head)
    runs on the lean path, which is kept."""
    model = llama()
    calls = []
    handle = model.model.layers[1].mlp.register_forward_hook(lambda m, i, o: calls.append(1))
    mask = torch.ones(2, 4, dtype=torch.long)
    try:
        assert lean_decoder(model, mask) is not None
        with torch.inference_mode():
            from alignlings.trainers.decode import lean_logits

            lean_logits(model, torch.tensor([[5, 6, 7, 8]] * 2), mask)
    finally:
        handle.remove()
    assert calls == [1]


def test_a_backward_hook_on_a_decoder_layer_runs():
    from alignlings.trainers.modeling import lm_logits

    model = gpt2()
    from alignlings.trainers.modeling import disable_dropout

    disable_dropout(model)
    model.train()
    seen = []
    handle = _layer(model).register_full_backward_hook(lambda m, gi, go: seen.append(go[0].shape))
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 12]])
    mask = torch.ones_like(ids)
    try:
        lm_logits(model, ids, mask, lean=True).sum().backward()
    finally:
        handle.remove()
    assert seen == [torch.Size([2, 4, 32])]


def test_dpo_trainer_honours_a_hook_on_a_decoder_layer(tmp_path):
    from alignlings.trainers import DPOConfig, DPOTrainer, toy

    tok = toy.make_tokenizer()
    pairs = [{"prompt": f"{a}+{b}=", "chosen": str(a + b), "rejected": str(a + b + 1)} for a, b in
             [(1, 2), (10, 5), (7, 7), (99, 1)]]
    args = DPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, max_steps=1, disable_tqdm=True,
                     save_steps=0, save_final_model=False)
    trainer = DPOTrainer(toy.make_model(tok, n_layer=2, n_embd=32, n_head=2), args=args, train_dataset=pairs,
                         processing_class=tok)
    batch = trainer.collate([0, 1, 2, 3])
    with torch.no_grad():
        before, _, _ = trainer.sequence_logps(trainer.model, batch, lean=True)
    handle = trainer.unwrapped_model.transformer.h[0].register_forward_hook(lambda m, i, o: _shift(o, 0.3))
    try:
        with torch.no_grad():
            lean_sum, _, _ = trainer.sequence_logps(trainer.model, batch, lean=True)  # what training_step calls
            plain_sum, _, _ = trainer.sequence_logps(trainer.model, batch, lean=False)
    finally:
        handle.remove()
    assert (plain_sum - before).abs().max() > 1e-3  # the hook moves the log-probs
    torch.testing.assert_close(lean_sum, plain_sum, atol=1e-5, rtol=1e-6)


def _completion_batch(make):
    """A model in training mode (dropout off), three right-padded rows with a 3-token prompt each, their
    attention and completion masks, and the trainable parameters."""
    from alignlings.trainers.modeling import disable_dropout

    model = make()
    disable_dropout(model)
    model.train()
    rows = [[5, 6, 7, 8, 9, 10], [9, 10, 11, 12, PAD, PAD], [11, 12, 13, 14, 15, PAD]]
    ids = torch.tensor(rows)
    mask = (ids != PAD).long()
    completion = mask.clone()
    completion[:, :3] = 0  # a 3-token prompt in every row
    return model, ids, mask, completion, [p for p in model.parameters() if p.requires_grad]


@pytest.mark.parametrize("make", [gpt2, qwen3, lora_llama], ids=["gpt2", "qwen3", "lora-llama"])
@pytest.mark.parametrize("lean", [True, False], ids=["lean", "forward"])
def test_scoring_only_the_completion_gives_the_full_passs_log_probs_and_gradients(make, lean):
    """``completion_token_logprobs`` puts only the positions that predict a completion token through the
    LM head; its per-token log-probs, sums and gradients equal ``completion_logprobs``' (every position
    scored, then masked), and its logits are the full pass's at those positions."""
    from alignlings.trainers.modeling import completion_logprobs, completion_token_logprobs

    model, ids, mask, completion, params = _completion_batch(make)
    results = []
    for fn in (completion_logprobs, completion_token_logprobs):
        model.zero_grad()
        logps, logits = fn(model, ids, mask, completion, temperature=0.7, lean=lean)
        (logps.sum * torch.tensor([1.0, -2.0, 0.5])).sum().backward()
        results.append((logps, logits, [p.grad.clone() for p in params]))
    (full, full_logits, full_grads), (part, part_logits, part_grads) = results
    torch.testing.assert_close(part.per_token, full.per_token, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(part.sum, full.sum, atol=1e-6, rtol=1e-6)
    assert torch.equal(part.mask, full.mask)
    scored = completion[:, 1:].bool()
    assert part_logits.shape == (int(scored.sum()), full_logits.shape[-1])
    torch.testing.assert_close(part_logits, full_logits[:, :-1][scored], atol=1e-5, rtol=1e-5)
    for a, b in zip(part_grads, full_grads):
        torch.testing.assert_close(a, b, atol=3e-6, rtol=1e-4)


@pytest.mark.parametrize("make", [gpt2, qwen3, lora_llama], ids=["gpt2", "qwen3", "lora-llama"])
@pytest.mark.parametrize("lean", [True, False], ids=["lean", "forward"])
def test_completion_sums_give_the_full_passs_sums_logits_and_gradients(make, lean):
    """``completion_sums`` (DPO's scoring: each row's sum accumulated from its scored positions, picked
    by index) gives ``completion_logprobs``' sums, logits at the scored positions and gradients; the
    batch's ``scored_positions`` hold each scored token, its row and each row's count."""
    from alignlings.trainers.modeling import completion_logprobs, completion_sums, scored_positions

    model, ids, mask, completion, params = _completion_batch(make)
    positions = scored_positions(ids, mask, completion, right_padded=True)
    assert positions.labels.tolist() == [8, 9, 10, 12, 14, 15]
    assert positions.rows.tolist() == [0, 0, 0, 1, 2, 2] and positions.lengths.tolist() == [3, 1, 2]
    weights = torch.tensor([1.0, -2.0, 0.5])
    model.zero_grad()
    full, full_logits = completion_logprobs(model, ids, mask, completion, lean=lean)
    (full.sum * weights).sum().backward()
    full_grads = [p.grad.clone() for p in params]
    model.zero_grad()
    sums, logits = completion_sums(model, ids, mask, positions, lean=lean)
    (sums * weights).sum().backward()
    torch.testing.assert_close(sums, full.sum, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(logits, full_logits[:, :-1][completion[:, 1:].bool()], atol=1e-5, rtol=1e-5)
    for p, b in zip(params, full_grads):
        torch.testing.assert_close(p.grad, b, atol=3e-6, rtol=1e-4)


def test_a_listed_class_with_soft_capping_falls_back_to_forward():
    model = gemma()
    model.config.final_logit_softcapping = 30.0  # set on a listed class: the decoder would not apply it
    assert lean_decoder(model, torch.ones(2, 4, dtype=torch.long)) is None


def _right_padded_rows():
    rows = [[5, 6, 7, 8, 9, 10], [9, 10, 11], [11, 12, 13, 14]]
    T = max(map(len, rows))
    ids = torch.tensor([r + [PAD] * (T - len(r)) for r in rows])
    return ids, (ids != PAD).long()


def test_a_module_the_gpt2_decoder_calls_as_a_module_sees_forwards_shapes():
    """GPT-2's lean pass keeps the hidden state as [B * T, E] rows; a layer it calls as a module (here
    a projection with a hook) still gets [B, T, E] and gives [B, T, F], as in ``forward``."""
    from alignlings.trainers.modeling import lm_logits

    model = gpt2()
    ids, mask = _right_padded_rows()
    seen = []
    handle = model.transformer.h[0].mlp.c_fc.register_forward_hook(
        lambda m, i, o: seen.append((tuple(i[0].shape), tuple(o.shape))))
    try:
        expected = _forward_logits(model, ids, mask)
        with torch.inference_mode():
            assert lean_decoder(model, mask) is not None  # the hook keeps the lean path
            got = lm_logits(model, ids, mask, lean=True).float()
    finally:
        handle.remove()
    assert seen == [((3, 6, 32), (3, 6, 128))] * 2
    torch.testing.assert_close(got[mask.bool()], expected[mask.bool()], atol=2e-5, rtol=1e-5)


def test_repeated_passes_reuse_the_decoders_plan(monkeypatch):
    """What a decoder makes of a model's modules is made once: later passes (any batch) reuse it."""
    from alignlings.trainers import decode

    model = gpt2()
    made = []
    init = decode.GPT2Decoder.__init__
    monkeypatch.setattr(decode.GPT2Decoder, "__init__", lambda self, *a, **k: made.append(1) or init(self, *a, **k))
    ids, mask = _right_padded_rows()
    with torch.inference_mode():
        first = decode.lean_logits(model, ids, mask)
        again = decode.lean_logits(model, ids, mask)
        decode.lean_logits(model, ids[:2, :4], mask[:2, :4])
    assert made == [1]
    assert torch.equal(first, again)


@pytest.mark.parametrize("change", ["parameter", "module", "load-state-dict", "hook", "dropout"])
def test_a_decoders_plan_follows_what_changes_in_the_model(change):
    """A parameter or a module replaced, weights loaded with ``assign=True``, a hook registered or a
    dropout switched on after a pass: the next lean pass computes what ``forward`` now computes (or
    gives way to it), not what the model was when the plan was made."""
    from transformers.pytorch_utils import Conv1D

    from alignlings.trainers.modeling import lm_logits

    model = gpt2()
    ids, mask = _right_padded_rows()
    real = mask.bool()
    with torch.inference_mode():
        before = lm_logits(model, ids, mask, lean=True).float()
    torch.manual_seed(1)
    c_fc = model.transformer.h[0].mlp.c_fc
    handles = []
    if change == "parameter":
        c_fc.weight = torch.nn.Parameter(torch.randn_like(c_fc.weight))
    elif change == "module":
        replacement = Conv1D(c_fc.nf, c_fc.weight.shape[0])
        torch.nn.init.normal_(replacement.weight, std=0.5)
        model.transformer.h[0].mlp.c_fc = replacement
    elif change == "load-state-dict":
        model.load_state_dict({k: v + 0.2 * torch.randn_like(v) for k, v in model.state_dict().items()}, assign=True)
    elif change == "hook":
        handles.append(_layer(model).register_forward_hook(lambda m, i, o: _shift(o)))
    else:
        model.train()
        model.transformer.h[0].mlp.dropout.p = 0.5
    try:
        model.eval() if change != "dropout" else None
        if change == "dropout":
            assert lean_decoder(model, mask) is None  # an active dropout: forward's randomness is its own
            return
        expected = _forward_logits(model, ids, mask)
        with torch.inference_mode():
            got = lm_logits(model, ids, mask, lean=True).float()
    finally:
        for h in handles:
            h.remove()
    assert (expected[real] - before[real]).abs().max() > 1e-2  # the change does change the model
    torch.testing.assert_close(got[real], expected[real], atol=2e-5, rtol=1e-5)
