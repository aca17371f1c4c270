"""Layer 2 for curriculum I: ``sft_loss`` against transformers, ``rloo_advantages`` against TRL 1.16.

- SFT: ``transformers.loss.loss_utils.ForCausalLMLoss``, the loss every causal LM computes from
  ``labels`` and the one TRL's SFTTrainer uses with ``loss_type="nll"``. It upcasts the logits to
  float32, so the comparison is in float32 (values and gradients agree to ~1e-7, checked to 1e-6).
  Gradient accumulation over micro-batches of unequal lengths with ``num_items_in_batch`` must equal
  one big batch (transformers PR #34191); the naive mean of per-micro-batch means must not.
- RLOO: ``RLOOTrainer._generate_and_score_completions`` itself, driven unbound with a stand-in
  ``self`` (as tests/test_parity_trl.py does for GRPO): ``_generate`` returns token-id lists,
  ``_get_per_token_logps_and_entropies`` zeros (beta = 0, so they are unused), ``_calculate_rewards``
  our reward matrix. TRL's inline leave-one-out code (nansum, scored counts, nan_to_num, the
  normalisation) runs unmodified, in float64.
"""

from __future__ import annotations

import collections
import types

import pytest
import torch

ForCausalLMLoss = pytest.importorskip("transformers.loss.loss_utils").ForCausalLMLoss
trl_rloo = pytest.importorskip("trl.trainer.rloo_trainer")

from alignlings import rloo_advantages, sft_loss  # noqa: E402

ATOL = 1e-6
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _close(ours, theirs, what):
    ours = torch.as_tensor(ours, dtype=torch.float64)
    theirs = torch.as_tensor(theirs, dtype=torch.float64)
    assert ours.shape == theirs.shape, f"{what}: shapes {tuple(ours.shape)} vs {tuple(theirs.shape)}"
    diff = (ours - theirs).abs().max().item() if ours.numel() else 0.0
    assert torch.allclose(ours, theirs, atol=ATOL, rtol=0, equal_nan=True), f"{what}: max |diff| {diff:.3g}"


# ---------------------------------------------------------------------------------------------
# SFT loss vs transformers' causal-LM loss
# ---------------------------------------------------------------------------------------------


def _sft_batch(seed, B, T, V, *, prompt_lens, lengths):
    """Right-padded batch: prompt tokens and padding labelled -100, EOS (the last real token) kept."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, T, V, generator=g) * 2
    input_ids = torch.randint(1, V, (B, T), generator=g)
    labels = input_ids.clone()
    for i in range(B):
        labels[i, : prompt_lens[i]] = -100
        labels[i, lengths[i]:] = -100
    return logits, labels


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("with_items", [False, True])
def test_sft_loss_and_gradient_match_transformers(seed, with_items):
    B, T, V = 4, 9, 13
    logits, labels = _sft_batch(seed, B, T, V, prompt_lens=[0, 2, 3, 1], lengths=[9, 7, 5, 8])
    n_items = torch.tensor(40) if with_items else None  # e.g. tokens of the whole accumulated batch
    ours_in = logits.clone().requires_grad_(True)
    theirs_in = logits.clone().requires_grad_(True)
    ours = sft_loss(ours_in, labels, num_items_in_batch=n_items)
    theirs = ForCausalLMLoss(theirs_in, labels, V, num_items_in_batch=n_items)
    ours.backward()
    theirs.backward()
    _close(ours, theirs, "sft loss")
    _close(ours_in.grad, theirs_in.grad, "sft gradient")
    # the gradient is zero at the last position (it predicts nothing) and where the next label is -100
    assert torch.all(ours_in.grad[:, -1] == 0)
    assert torch.all(ours_in.grad[1, 6:] == 0)


def test_sft_loss_hand_worked():
    # V = 2, logits 0 everywhere: every next-token NLL is log 2. Two scored tokens -> mean log 2.
    logits = torch.zeros(1, 3, 2)
    labels = torch.tensor([[-100, 1, 0]])  # the prompt token is not a target; tokens 1 and 2 are
    assert sft_loss(logits, labels).item() == pytest.approx(0.693147, abs=1e-6)
    # now make position 0 sure of token 1 (logit 10 vs 0): NLL = log(1 + e^-10) = 4.54e-5
    logits[0, 0, 1] = 10.0
    expected = (torch.log1p(torch.exp(torch.tensor(-10.0))) + torch.log(torch.tensor(2.0))) / 2
    assert sft_loss(logits, labels).item() == pytest.approx(expected.item(), abs=1e-7)
    assert sft_loss(logits, labels, num_items_in_batch=4).item() == pytest.approx(expected.item() / 2, abs=1e-7)


def test_gradient_accumulation_with_num_items_equals_one_big_batch():
    """Two micro-batches, 3 and 11 label tokens. Summing micro-batch losses divided by the 14 tokens of
    the step gives the big batch's loss and gradient; averaging per-micro-batch means does not."""
    V, T = 11, 12
    torch.manual_seed(0)
    weight = torch.randn(V, 5, dtype=torch.float32)
    hidden = torch.randn(3, T, 5)
    _, labels = _sft_batch(3, 3, T, V, prompt_lens=[6, 1, 2], lengths=[10, 12, 8])
    labels[0, :] = -100
    labels[0, 8:11] = torch.tensor([4, 2, 7])  # micro-batch 1: 3 label tokens; micro-batch 2: 11
    micro = [(hidden[:1], labels[:1]), (hidden[1:], labels[1:])]
    counts = [int((y[:, 1:] != -100).sum()) for _, y in micro]
    assert counts[0] != counts[1]
    n_items = sum(counts)

    def grad_of(fn):
        w = weight.clone().requires_grad_(True)
        loss = fn(w)
        loss.backward()
        return loss.detach(), w.grad

    big_loss, big_grad = grad_of(lambda w: ForCausalLMLoss(hidden @ w.T, labels, V))
    acc_loss, acc_grad = grad_of(
        lambda w: sum(sft_loss(h @ w.T, y, num_items_in_batch=n_items) for h, y in micro))
    theirs_acc_loss, theirs_acc_grad = grad_of(
        lambda w: sum(ForCausalLMLoss(h @ w.T, y, V, num_items_in_batch=torch.tensor(n_items)) for h, y in micro))
    naive_loss, naive_grad = grad_of(lambda w: sum(sft_loss(h @ w.T, y) for h, y in micro) / len(micro))

    _close(acc_loss, big_loss, "accumulated loss vs big batch")
    _close(acc_grad, big_grad, "accumulated gradient vs big batch")
    _close(acc_loss, theirs_acc_loss, "accumulated loss vs transformers")
    _close(acc_grad, theirs_acc_grad, "accumulated gradient vs transformers")
    assert abs(naive_loss - big_loss) > 1e-3, "the per-micro-batch mean should differ with unequal lengths"
    assert (naive_grad - big_grad).abs().max() > 1e-3


def test_sft_loss_half_precision_upcasts_like_transformers():
    logits, labels = _sft_batch(5, 2, 6, 9, prompt_lens=[1, 2], lengths=[6, 5])
    half = logits.to(torch.bfloat16)
    ours = sft_loss(half, labels)
    assert ours.dtype == torch.float32
    _close(ours, ForCausalLMLoss(half, labels, 9), "bf16 sft loss")


@pytest.mark.parametrize("bad", [
    dict(labels=torch.zeros(2, 5)),  # float labels
    dict(labels=torch.zeros(2, 4, dtype=torch.long)),  # wrong T
    dict(num_items_in_batch=0),
])
def test_sft_loss_rejects_bad_input(bad):
    kwargs = dict(logits=torch.zeros(2, 5, 3), labels=torch.zeros(2, 5, dtype=torch.long)) | bad
    name = next(iter(bad))
    with pytest.raises(ValueError, match=name):
        sft_loss(kwargs.pop("logits"), kwargs.pop("labels"), **kwargs)


# ---------------------------------------------------------------------------------------------
# RLOO advantages vs RLOOTrainer._generate_and_score_completions
# ---------------------------------------------------------------------------------------------


def _trl_rloo_advantages(rewards: torch.Tensor, *, num_generations: int, normalize: bool) -> torch.Tensor:
    n = rewards.shape[0]

    def generate(prompts):
        m = len(prompts)
        return [[1, 2]] * m, [[3, 4, 5]] * m, ["c"] * m  # prompt ids, completion ids, completions

    def per_token_logps(model, input_ids, attention_mask, logits_to_keep, batch_size, **kwargs):
        return torch.zeros(input_ids.shape[0], logits_to_keep, dtype=rewards.dtype), None, None

    this = types.SimpleNamespace(
        accelerator=types.SimpleNamespace(device=torch.device("cpu"), num_processes=1, process_index=0,
                                          reduce=lambda x, reduction="sum": x),
        model=types.SimpleNamespace(training=True, is_gradient_checkpointing=False),
        args=types.SimpleNamespace(per_device_train_batch_size=n, gradient_checkpointing_kwargs=None),
        _generate=generate,
        _get_per_token_logps_and_entropies=per_token_logps,
        _calculate_rewards=lambda inputs, prompts, completions, completion_ids: rewards.unsqueeze(1),
        _tokenizer=types.SimpleNamespace(pad_token_id=0),
        pad_to_multiple_of=None,
        mask_truncated_completions=False,
        beta=0.0,
        reward_clip_range=None,
        num_generations=num_generations,
        normalize_advantages=normalize,
        reward_weights=torch.ones(1, dtype=rewards.dtype),
        reward_func_names=["f0"],
        _metrics=collections.defaultdict(lambda: collections.defaultdict(list)),
        _logs={"prompt": [], "completion": [], "rewards": collections.defaultdict(list), "advantages": [],
               "extra": collections.defaultdict(list)},
        _pending_extra_logs={},
        _pending_metrics={},
        log_multimodal=False,
    )
    return trl_rloo.RLOOTrainer._generate_and_score_completions(this, [{"prompt": "p"}] * n)["advantages"]


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("P,G", [(1, 2), (1, 8), (3, 4), (2, 16), (4, 1)])
def test_rloo_advantages_match_trl(normalize, P, G):
    for seed in (0, 1, 2):
        g = torch.Generator().manual_seed(seed)
        rewards = torch.rand(P * G, generator=g, dtype=torch.float64)
        if seed == 1:
            rewards = (rewards > 0.6).to(torch.float64)  # pass/fail rewards
        if seed == 2:
            rewards[:G] = 0.5  # a flat group
        theirs = _trl_rloo_advantages(rewards, num_generations=G, normalize=normalize)
        ours = rloo_advantages(rewards, num_generations=G, normalize=normalize)
        _close(ours, theirs, f"rloo P={P} G={G} normalize={normalize} seed={seed}")


@pytest.mark.parametrize("normalize", [False, True])
def test_rloo_advantages_with_unscored_rows_match_trl(normalize):
    """NaN = no reward function scored the completion: it leaves its siblings' baselines and gets 0;
    a group with one scored completion gives it 0 too (0 / 0 in TRL)."""
    rewards = torch.rand(4 * 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    rewards[1] = float("nan")  # group 0: one unscored
    rewards[4:7] = float("nan")  # group 1: only one scored
    rewards[8:12] = float("nan")  # group 2: none scored
    theirs = _trl_rloo_advantages(rewards, num_generations=4, normalize=normalize)
    ours = rloo_advantages(rewards, num_generations=4, normalize=normalize)
    _close(ours, theirs, f"rloo with NaN, normalize={normalize}")
    assert ours[1] == 0 and ours[7] == 0 and torch.all(ours[8:12] == 0)


def test_rloo_hand_worked():
    # group [1, 0, 0, 1]: baselines 1/3, 2/3, 2/3, 1/3 -> advantages 2/3, -2/3, -2/3, 2/3
    adv = rloo_advantages(torch.tensor([1.0, 0.0, 0.0, 1.0]), num_generations=4)
    assert torch.allclose(adv, torch.tensor([2 / 3, -2 / 3, -2 / 3, 2 / 3]))
    # = G/(G-1) times the group-centred reward (GRPO's "none" scaling)
    r = torch.rand(3, 5, generator=torch.Generator().manual_seed(4))
    centred = r - r.mean(dim=1, keepdim=True)
    assert torch.allclose(rloo_advantages(r.flatten(), num_generations=5), (5 / 4 * centred).flatten(), atol=1e-6)


@pytest.mark.parametrize("bad,name", [
    (dict(rewards=torch.zeros(2, 3)), "rewards"),
    (dict(rewards=torch.zeros(6, dtype=torch.long)), "rewards"),
    (dict(num_generations=4), "num_generations"),
    (dict(num_generations=0), "num_generations"),
])
def test_rloo_rejects_bad_input(bad, name):
    kwargs = dict(rewards=torch.zeros(6), num_generations=3) | bad
    with pytest.raises(ValueError, match=name):
        rloo_advantages(kwargs.pop("rewards"), **kwargs)
