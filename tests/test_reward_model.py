"""RewardModel (exercise 5 and beyond) and the Bradley-Terry loss.

Layers: the exercise-5 setup reproduced; pooling on inputs whose answer is known; transformers
backbones (padding invariance, parity with GPT2ForSequenceClassification's pooling); which
parameters train; bradley_terry_loss by hand and against TRL's RewardTrainer.compute_loss; errors.
"""

from __future__ import annotations

import math
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from alignlings import RewardModel, bradley_terry_loss

transformers = pytest.importorskip("transformers")


def exercise5_backbone() -> nn.Module:
    return nn.Sequential(nn.Embedding(100, 64), nn.Linear(64, 64), nn.GELU())


class OneHotTokens(nn.Module):
    """Hidden state at (b, t) = one-hot of the token id: a value head w = arange(H) reads the id back."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.hidden = hidden

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return F.one_hot(input_ids, self.hidden).float()  # [B, T, H]


class OneHotPositions(nn.Module):
    """Hidden state at (b, t) = one-hot of the position t."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.hidden = hidden

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        B, T = input_ids.shape
        return F.one_hot(torch.arange(T), self.hidden).float().expand(B, T, self.hidden)


def reader(backbone: nn.Module, hidden: int) -> RewardModel:
    """A RewardModel whose reward is sum_h h * hidden[h]: the id (or position) that was pooled."""
    rm = RewardModel(backbone, hidden)
    with torch.no_grad():
        rm.value_head.weight.copy_(torch.arange(hidden, dtype=torch.float).unsqueeze(0))
        rm.value_head.bias.zero_()
    return rm


def tiny_gpt2_config(**kwargs):
    return transformers.GPT2Config(
        vocab_size=20, n_positions=16, n_embd=16, n_layer=2, n_head=2, bos_token_id=1, eos_token_id=1,
        pad_token_id=0, **kwargs,
    )


# --------------------------------------------------------------------------------------------
# Exercise 5, reproduced
# --------------------------------------------------------------------------------------------


def test_exercise5_setup_counts_and_forward():
    torch.manual_seed(42)
    backbone = exercise5_backbone()
    rm = RewardModel(backbone, 64)
    chosen_ids = torch.randint(0, 100, (4, 10))
    rejected_ids = torch.randint(0, 100, (4, 10))

    trainable = sum(p.numel() for p in rm.parameters() if p.requires_grad)
    total = sum(p.numel() for p in rm.parameters())
    assert trainable == 64 + 1 == 65  # value head only
    assert total == 100 * 64 + (64 * 64 + 64) + 65 == 10625

    r_chosen, r_rejected = rm(chosen_ids), rm(rejected_ids)
    assert r_chosen.shape == r_rejected.shape == (4,)
    # the exercise's forward: the last position's hidden state through the value head
    for ids, rewards in ((chosen_ids, r_chosen), (rejected_ids, r_rejected)):
        expected = rm.value_head(backbone(ids)[:, -1]).squeeze(-1)
        torch.testing.assert_close(rewards, expected)
    loss = bradley_terry_loss(r_chosen, r_rejected)
    torch.testing.assert_close(loss, -F.logsigmoid(r_chosen - r_rejected).mean())
    assert loss.requires_grad and math.isfinite(loss.item())


def test_exercise5_default_is_frozen_and_hidden_dim_required_for_plain_module():
    with pytest.raises(ValueError, match="hidden_dim"):
        RewardModel(exercise5_backbone())
    rm = RewardModel(exercise5_backbone(), 64)
    assert all(not p.requires_grad for p in rm.backbone.parameters())
    assert all(p.requires_grad for p in rm.value_head.parameters())
    assert isinstance(rm.value_head, nn.Linear) and rm.value_head.out_features == 1


# --------------------------------------------------------------------------------------------
# Pooling
# --------------------------------------------------------------------------------------------


def test_pooling_reads_last_real_token_under_right_and_left_padding():
    rm = reader(OneHotTokens(10), 10)
    pad = 0
    input_ids = torch.tensor([
        [5, 6, 7, pad, pad],  # right padding: the answer is 7, the last position is a pad
        [pad, pad, 5, 6, 8],  # left padding: 8
        [3, 4, 5, 6, 9],      # no padding: 9
    ])
    attention_mask = (input_ids != pad).long()
    torch.testing.assert_close(rm(input_ids, attention_mask), torch.tensor([7.0, 8.0, 9.0]))
    # Without a mask the last position is used: the right-padded row reads its pad token (the pitfall).
    torch.testing.assert_close(rm(input_ids), torch.tensor([0.0, 8.0, 9.0]))


def test_pooling_index_is_rightmost_one_in_the_mask():
    rm = reader(OneHotPositions(8), 8)
    attention_mask = torch.tensor([
        [1, 1, 0, 0, 0, 0],
        [0, 0, 0, 1, 1, 1],
        [1, 1, 1, 1, 1, 1],
        [0, 0, 1, 0, 0, 0],
        [True, False, True, True, False, False],
    ])
    ids = torch.zeros(attention_mask.shape, dtype=torch.long)
    torch.testing.assert_close(rm(ids, attention_mask), torch.tensor([1.0, 5.0, 5.0, 2.0, 3.0]))
    torch.testing.assert_close(rm(ids, attention_mask.bool()), torch.tensor([1.0, 5.0, 5.0, 2.0, 3.0]))
    torch.testing.assert_close(rm(ids), torch.full((5,), 5.0))


def test_backbone_output_with_last_hidden_state_attribute():
    class Wrapped(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = OneHotTokens(6)

        def forward(self, input_ids):
            return SimpleNamespace(last_hidden_state=self.inner(input_ids))

    rm = reader(Wrapped(), 6)
    torch.testing.assert_close(rm(torch.tensor([[1, 2, 3]])), torch.tensor([3.0]))


# --------------------------------------------------------------------------------------------
# transformers backbones
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls_name", ["GPT2Model", "GPT2LMHeadModel"])
def test_transformers_backbone_infers_hidden_dim_and_is_padding_invariant(cls_name):
    torch.manual_seed(0)
    backbone = getattr(transformers, cls_name)(tiny_gpt2_config()).eval()
    rm = RewardModel(backbone)
    assert rm.value_head.in_features == 16

    text = [5, 6, 7, 8]
    unpadded = rm(torch.tensor([text]))
    right = rm(torch.tensor([text + [0, 0]]), torch.tensor([[1, 1, 1, 1, 0, 0]]))
    left = rm(torch.tensor([[0, 0] + text]), torch.tensor([[0, 0, 1, 1, 1, 1]]))
    torch.testing.assert_close(right, unpadded, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(left, unpadded, atol=1e-5, rtol=1e-5)

    # Mixed batch: each row as if it were alone.
    ids = torch.tensor([text + [0, 0], [0, 0] + text, [9, 8, 7, 6, 5, 4]])
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    batch = rm(ids, mask)
    torch.testing.assert_close(batch[:2], unpadded.expand(2), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(batch[2:], rm(ids[2:]), atol=1e-5, rtol=1e-5)


def test_causal_lm_backbone_pools_its_last_hidden_state():
    torch.manual_seed(1)
    lm = transformers.GPT2LMHeadModel(tiny_gpt2_config()).eval()
    rm = RewardModel(lm)
    ids = torch.randint(2, 20, (3, 5))
    hidden = lm(input_ids=ids, output_hidden_states=True).hidden_states[-1]  # [B, T, H], after ln_f
    torch.testing.assert_close(rm(ids), rm.value_head(hidden[:, -1]).squeeze(-1))


def test_matches_gpt2_for_sequence_classification_pooling_with_right_padding():
    torch.manual_seed(2)
    classifier = transformers.GPT2ForSequenceClassification(tiny_gpt2_config(num_labels=1)).eval()
    rm = RewardModel(classifier.transformer)
    with torch.no_grad():
        rm.value_head.weight.copy_(classifier.score.weight)  # score has no bias
        rm.value_head.bias.zero_()
    ids = torch.tensor([[5, 6, 7, 0, 0], [8, 9, 10, 11, 12], [3, 0, 0, 0, 0]])
    mask = (ids != 0).long()
    expected = classifier(input_ids=ids, attention_mask=mask).logits.squeeze(-1)
    torch.testing.assert_close(rm(ids, mask), expected, atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------------------------------------
# What trains
# --------------------------------------------------------------------------------------------


def _one_step(rm: RewardModel, lr: float = 0.1) -> dict[str, torch.Tensor]:
    before = {name: p.detach().clone() for name, p in rm.named_parameters()}
    chosen, rejected = torch.randint(0, 100, (4, 10)), torch.randint(0, 100, (4, 10))
    opt = torch.optim.SGD([p for p in rm.parameters() if p.requires_grad], lr=lr)
    # The plain BT loss only sees r_c - r_r, so the head's bias gets exactly zero gradient; the
    # centring term gives it one.
    loss = bradley_terry_loss(rm(chosen), rm(rejected), center_rewards_coefficient=0.1)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return before


def test_frozen_backbone_gets_no_gradient_and_runs_without_autograd():
    torch.manual_seed(42)
    rm = RewardModel(exercise5_backbone(), 64)
    grad_enabled_inside = []
    rm.backbone.register_forward_hook(lambda mod, inp, out: grad_enabled_inside.append(torch.is_grad_enabled()))
    before = _one_step(rm)
    assert grad_enabled_inside == [False, False]
    for name, p in rm.named_parameters():
        if name.startswith("backbone."):
            assert p.grad is None, name
            assert torch.equal(p, before[name]), f"{name} changed"
        else:
            assert p.grad is not None and p.grad.abs().sum() > 0, name
            assert not torch.equal(p, before[name]), f"{name} did not change"


def test_unfrozen_backbone_trains_everything():
    torch.manual_seed(42)
    rm = RewardModel(exercise5_backbone(), 64, freeze_backbone=False)
    assert all(p.requires_grad for p in rm.parameters())
    assert sum(p.numel() for p in rm.parameters() if p.requires_grad) == 10625
    before = _one_step(rm)
    for name, p in rm.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
        assert not torch.equal(p, before[name]), f"{name} did not change"


def test_frozen_transformers_backbone_only_head_changes():
    torch.manual_seed(3)
    lm = transformers.GPT2LMHeadModel(tiny_gpt2_config()).eval()
    rm = RewardModel(lm)
    assert sum(p.numel() for p in rm.parameters() if p.requires_grad) == 17
    before = {n: p.detach().clone() for n, p in rm.named_parameters()}
    opt = torch.optim.Adam([p for p in rm.parameters() if p.requires_grad], lr=1e-2)
    ids, mask = torch.randint(2, 20, (4, 6)), torch.ones(4, 6, dtype=torch.long)
    loss = bradley_terry_loss(rm(ids[:2], mask[:2]), rm(ids[2:], mask[2:]), center_rewards_coefficient=0.1)
    loss.backward()
    opt.step()
    changed = {n for n, p in rm.named_parameters() if not torch.equal(p, before[n])}
    assert changed == {"value_head.weight", "value_head.bias"}


# --------------------------------------------------------------------------------------------
# Bradley-Terry loss
# --------------------------------------------------------------------------------------------

R_CHOSEN = torch.tensor([2.0, 0.5])
R_REJECTED = torch.tensor([-1.0, 1.5])


def test_bradley_terry_ignores_a_shared_shift_so_the_bias_gets_no_gradient():
    rm = RewardModel(exercise5_backbone(), 64)
    loss = bradley_terry_loss(rm(torch.randint(0, 100, (4, 10))), rm(torch.randint(0, 100, (4, 10))))
    loss.backward()
    assert abs(rm.value_head.bias.grad.item()) < 1e-7
    assert rm.value_head.weight.grad.abs().sum() > 0


def test_bradley_terry_hand_computed():
    # r_c - r_r = [3, -1];  -log sigma(x) = log(1 + e^-x)
    #   pair 1: log(1 + e^-3) = log(1.049787) = 0.048587
    #   pair 2: log(1 + e^+1) = log(3.718282) = 1.313262
    #   mean = (0.048587 + 1.313262) / 2 = 0.680924
    per_pair = bradley_terry_loss(R_CHOSEN, R_REJECTED, reduction="none")
    torch.testing.assert_close(per_pair, torch.tensor([0.048587, 1.313262]), atol=1e-6, rtol=0)
    torch.testing.assert_close(bradley_terry_loss(R_CHOSEN, R_REJECTED), torch.tensor(0.680924), atol=1e-6, rtol=0)
    torch.testing.assert_close(
        bradley_terry_loss(R_CHOSEN, R_REJECTED, reduction="sum"), torch.tensor(1.361849), atol=1e-6, rtol=0
    )
    # exercise 1's numbers: r_w = 2, r_l = -1 -> P = sigma(3) = 0.952574, loss = -log P
    assert math.isclose(math.exp(-per_pair[0].item()), 0.952574, abs_tol=1e-6)


def test_bradley_terry_margin_hand_computed():
    # margin [1, 0]: logits [3 - 1, -1 - 0] = [2, -1]
    #   log(1 + e^-2) = log(1.135335) = 0.126928;  log(1 + e) = 1.313262;  mean = 0.720095
    loss = bradley_terry_loss(R_CHOSEN, R_REJECTED, margin=torch.tensor([1.0, 0.0]))
    torch.testing.assert_close(loss, torch.tensor(0.720095), atol=1e-6, rtol=0)
    # scalar margin 0.5: logits [2.5, -1.5] -> log(1 + e^-2.5) = 0.078889, log(1 + e^1.5) = 1.701413
    loss = bradley_terry_loss(R_CHOSEN, R_REJECTED, margin=0.5)
    torch.testing.assert_close(loss, torch.tensor((0.078889 + 1.701413) / 2), atol=1e-6, rtol=0)


def test_bradley_terry_center_rewards_hand_computed():
    # (r_c + r_r)^2 = [(2 - 1)^2, (0.5 + 1.5)^2] = [1, 4], mean 2.5; coef 0.01 adds 0.025
    loss = bradley_terry_loss(R_CHOSEN, R_REJECTED, center_rewards_coefficient=0.01)
    torch.testing.assert_close(loss, torch.tensor(0.680924 + 0.025), atol=1e-6, rtol=0)
    per_pair = bradley_terry_loss(R_CHOSEN, R_REJECTED, center_rewards_coefficient=0.01, reduction="none")
    torch.testing.assert_close(per_pair, torch.tensor([0.048587 + 0.01, 1.313262 + 0.04]), atol=1e-6, rtol=0)


def _trl_compute_loss(chosen, rejected, margin=None, center_rewards_coefficient=None):
    """TRL 1.16's RewardTrainer.compute_loss on a stand-in trainer whose model returns these rewards."""
    reward_trainer = pytest.importorskip("trl.trainer.reward_trainer")
    identity = lambda x: x  # noqa: E731
    fake_self = SimpleNamespace(
        model=SimpleNamespace(training=False),  # "eval" mode: no token accounting
        args=SimpleNamespace(center_rewards_coefficient=center_rewards_coefficient),
        accelerator=SimpleNamespace(gather=identity, gather_for_metrics=identity),
        _metrics=defaultdict(lambda: defaultdict(list)),
        _total_train_tokens=0,
        _tp_size=1,
    )
    logits = torch.cat([chosen, rejected]).unsqueeze(-1)  # [2B, 1]: chosen rows first, as TRL's collator
    model = lambda **inputs: SimpleNamespace(logits=logits)  # noqa: E731
    inputs = {"input_ids": torch.zeros(2 * len(chosen), 3, dtype=torch.long),
              "attention_mask": torch.ones(2 * len(chosen), 3, dtype=torch.long)}
    if margin is not None:
        inputs["margin"] = margin
    return reward_trainer.RewardTrainer.compute_loss(fake_self, model, inputs)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("with_margin", [False, True])
@pytest.mark.parametrize("center", [None, 0.01])
def test_bradley_terry_matches_trl_reward_trainer(seed, with_margin, center):
    g = torch.Generator().manual_seed(seed)
    chosen, rejected = torch.randn(6, generator=g) * 3, torch.randn(6, generator=g) * 3
    margin = torch.rand(6, generator=g) * 2 if with_margin else None
    expected = _trl_compute_loss(chosen, rejected, margin, center)
    got = bradley_terry_loss(chosen, rejected, margin=margin, center_rewards_coefficient=center)
    torch.testing.assert_close(got, expected)


# --------------------------------------------------------------------------------------------
# Errors name the argument
# --------------------------------------------------------------------------------------------


@pytest.fixture
def rm() -> RewardModel:
    torch.manual_seed(0)
    return RewardModel(exercise5_backbone(), 64)


def test_input_ids_errors(rm):
    with pytest.raises(ValueError, match="input_ids"):
        rm(torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="input_ids"):
        rm(torch.zeros(2, 3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="input_ids"):
        rm(torch.zeros(2, 0, dtype=torch.long))
    with pytest.raises(ValueError, match="input_ids"):
        rm(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="input_ids"):
        rm([[1, 2, 3]])


def test_attention_mask_errors(rm):
    ids = torch.randint(0, 100, (2, 4))
    with pytest.raises(ValueError, match="attention_mask"):
        rm(ids, torch.ones(2, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="attention_mask"):
        rm(ids, torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0]]))  # row 1 has no real token
    with pytest.raises(ValueError, match=r"attention_mask: rows \[1\]"):
        rm(ids, torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0]]))
    with pytest.raises(ValueError, match="attention_mask"):
        rm(ids, torch.tensor([[1, 2, 0, 0], [1, 1, 1, 1]]))
    with pytest.raises(ValueError, match="attention_mask"):
        rm(ids, [[1, 1, 1, 1], [1, 1, 1, 1]])


def test_constructor_and_backbone_errors():
    with pytest.raises(ValueError, match="backbone"):
        RewardModel(lambda ids: ids, 4)
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="hidden_dim"):
            RewardModel(exercise5_backbone(), bad)
    with pytest.raises(ValueError, match="hidden_dim"):
        RewardModel(exercise5_backbone(), 32)(torch.randint(0, 100, (2, 3)))  # backbone gives 64

    class Flat(nn.Module):
        def forward(self, input_ids):
            return input_ids.float().sum(-1)  # [B], not [B, T, H]

    with pytest.raises(ValueError, match="backbone"):
        RewardModel(Flat(), 4)(torch.zeros(2, 3, dtype=torch.long))

    class NoHidden(nn.Module):
        def forward(self, input_ids):
            return input_ids.float()  # [B, T]: no hidden axis

    with pytest.raises(ValueError, match="backbone"):
        RewardModel(NoHidden(), 3)(torch.zeros(2, 3, dtype=torch.long))

    class Tuple(nn.Module):
        def forward(self, input_ids):
            return (input_ids,)

    with pytest.raises(ValueError, match="backbone"):
        RewardModel(Tuple(), 4)(torch.zeros(2, 3, dtype=torch.long))
