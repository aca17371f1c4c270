"""Tests for alignlings.logprobs: selective_log_softmax and sequence_logprobs.

Layers (see shared STYLE.md): 1. hand-computed values, 2. against the naive log_softmax + gather and
against TRL's own selective_log_softmax, 3. hypothesis properties, plus gradcheck, a check that no
[N, V] tensor is ever created where none should be, and the error messages.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

from alignlings.logprobs import (SequenceLogProbs, _sequence_logprobs, fused_sequence_logprobs,
                                 selective_log_softmax, sequence_logprobs)

LN2, LN3, LN5 = math.log(2.0), math.log(3.0), math.log(5.0)


def naive(logits, labels, mask=None, shift=False, temperature=1.0, ignore_index=-100):
    """The textbook version: the full log-softmax, then gather; returns (per_token, sum, keep)."""
    if shift:
        logits, labels = logits[:, :-1], labels[:, 1:]
        mask = None if mask is None else mask[:, 1:]
    keep = labels != ignore_index
    if mask is not None:
        keep = keep & mask.bool()
    logp = (logits / temperature).log_softmax(-1)
    per_token = logp.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1) * keep
    return per_token, per_token.sum(-1), keep


def make_case(B=3, T=7, V=11, H=5, dtype=torch.float64, seed=0, ignore_frac=0.3):
    g = torch.Generator().manual_seed(seed)
    logits = (3 * torch.randn(B, T, V, generator=g)).to(dtype)
    labels = torch.randint(0, V, (B, T), generator=g)
    labels[torch.rand(B, T, generator=g) < ignore_frac] = -100
    mask = (torch.rand(B, T, generator=g) > ignore_frac).long()
    hidden = torch.randn(B, T, H, generator=g).to(dtype)
    weight = torch.randn(V, H, generator=g).to(dtype)
    bias = torch.randn(V, generator=g).to(dtype)
    return logits, labels, mask, hidden, weight, bias


# ---------------------------------------------------------------- 1. hand-computed values


def hand_logits(dtype=torch.float64):
    # row 0: [0, ln 2, ln 5] -> exp = [1, 2, 5], sum 8, softmax [1/8, 2/8, 5/8]
    # row 1: [0, 0, 0]      -> softmax [1/3, 1/3, 1/3]
    # row 2: [ln 3, 0, 0]   -> exp = [3, 1, 1], sum 5, softmax [3/5, 1/5, 1/5]
    return torch.tensor([[[0.0, LN2, LN5], [0.0, 0.0, 0.0], [LN3, 0.0, 0.0]]], dtype=dtype)


def test_hand_computed_values_and_gradient():
    logits = hand_logits().requires_grad_()
    labels = torch.tensor([[2, 1, -100]])
    out = sequence_logprobs(logits, labels)
    # log p = z_y - logsumexp(z): row 0 ln 5 - ln 8 = ln(5/8); row 1 0 - ln 3 = ln(1/3); row 2 ignored -> 0
    expected = torch.tensor([[math.log(5 / 8), math.log(1 / 3), 0.0]], dtype=torch.float64)
    torch.testing.assert_close(out.per_token, expected, rtol=0, atol=1e-12)
    # sum = ln(5/8) + ln(1/3) = ln(5/24) = -1.5686159...
    torch.testing.assert_close(out.sum, torch.tensor([math.log(5 / 24)], dtype=torch.float64), rtol=0, atol=1e-12)
    torch.testing.assert_close(out.mask, torch.tensor([[1.0, 1.0, 0.0]], dtype=torch.float64))
    # mean over the 2 kept tokens = ln(5/24) / 2
    torch.testing.assert_close(out.mean, torch.tensor([math.log(5 / 24) / 2], dtype=torch.float64))
    # d sum / d z = onehot(y) - softmax(z) per kept row, 0 for the ignored row:
    # row 0: [0, 0, 1] - [1/8, 2/8, 5/8] = [-1/8, -1/4, 3/8]; row 1: [0, 1, 0] - 1/3 = [-1/3, 2/3, -1/3]
    out.sum.sum().backward()
    expected_grad = torch.tensor(
        [[[-1 / 8, -1 / 4, 3 / 8], [-1 / 3, 2 / 3, -1 / 3], [0.0, 0.0, 0.0]]], dtype=torch.float64
    )
    torch.testing.assert_close(logits.grad, expected_grad, rtol=0, atol=1e-12)


def test_hand_computed_shift_and_temperature():
    logits = hand_logits().requires_grad_()
    # shift=True: logits at t score input_ids[t + 1], so rows 0 and 1 score ids 2 and 1; row 2 scores nothing
    input_ids = torch.tensor([[0, 2, 1]])
    out = sequence_logprobs(logits, input_ids, shift=True)
    torch.testing.assert_close(
        out.per_token, torch.tensor([[math.log(5 / 8), math.log(1 / 3)]], dtype=torch.float64), rtol=0, atol=1e-12
    )
    out.sum.sum().backward()
    assert torch.equal(logits.grad[0, 2], torch.zeros(3, dtype=torch.float64))
    # temperature 2 on row 0: z / 2 = [0, ln sqrt 2, ln sqrt 5] -> exp [1, sqrt 2, sqrt 5]
    # log p(2) = ln sqrt 5 - ln(1 + sqrt 2 + sqrt 5)
    hot = sequence_logprobs(hand_logits()[:, :1], torch.tensor([[2]]), temperature=2.0)
    expected = 0.5 * LN5 - math.log(1 + math.sqrt(2) + math.sqrt(5))
    assert hot.per_token.item() == pytest.approx(expected, abs=1e-12)


def test_hand_computed_fused():
    # weight = identity makes the logits equal to the hidden states; the bias [0, ln 2, ln 5] on zero
    # hidden states gives row 0 of hand_logits again: log p(2) = ln(5/8)
    hidden = hand_logits().clone()
    out = fused_sequence_logprobs(hidden_states=hidden, labels=torch.tensor([[2, 1, -100]]),
                            lm_head_weight=torch.eye(3, dtype=torch.float64))
    torch.testing.assert_close(out.per_token, torch.tensor([[math.log(5 / 8), math.log(1 / 3), 0.0]],
                                                           dtype=torch.float64), rtol=0, atol=1e-12)
    out = fused_sequence_logprobs(hidden_states=torch.zeros(1, 1, 3, dtype=torch.float64), labels=torch.tensor([[2]]),
                            lm_head_weight=torch.zeros(3, 3, dtype=torch.float64),
                            lm_head_bias=torch.tensor([0.0, LN2, LN5], dtype=torch.float64))
    assert out.sum.item() == pytest.approx(math.log(5 / 8), abs=1e-12)


def test_selective_log_softmax_hand_computed():
    logits = hand_logits()[0]  # [3, 3]
    # row 0 -> ln(5/8), row 1 -> ln(1/3), row 2 label 0 -> ln(3/5)
    out = selective_log_softmax(logits, torch.tensor([2, 1, 0]))
    torch.testing.assert_close(out, torch.log(torch.tensor([5 / 8, 1 / 3, 3 / 5], dtype=torch.float64)))
    # [..., K] index: K = 2 tokens per row; row 0 tokens 0 and 2 -> ln(1/8), ln(5/8)
    out = selective_log_softmax(logits, torch.tensor([[0, 2], [1, 1], [0, 1]]))
    torch.testing.assert_close(out[0], torch.log(torch.tensor([1 / 8, 5 / 8], dtype=torch.float64)))


def test_result_unpacks():
    out = sequence_logprobs(*make_case()[:2])
    assert isinstance(out, SequenceLogProbs)
    per_token, total, mask = out
    assert per_token.shape == (3, 7) and total.shape == (3,) and mask.shape == (3, 7)


# ---------------------------------------------------------------- 2a. against TRL's own selective_log_softmax


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    "shape,k", [((4, 9, 37), None), ((2, 3, 5, 50), None), ((6, 40), None), ((3, 8, 29), 3)]
)
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_selective_log_softmax_matches_trl(dtype, shape, k, temperature):
    trl_utils = pytest.importorskip("trl.trainer.utils")
    g = torch.Generator().manual_seed(1)
    logits = (4 * torch.randn(shape, generator=g)).to(dtype)
    index_shape = shape[:-1] + ((k,) if k else ())
    index = torch.randint(0, shape[-1], index_shape, generator=g)
    ours_in = logits.clone().requires_grad_()
    trl_in = logits.clone().requires_grad_()
    ours = selective_log_softmax(ours_in, index, temperature, chunk_size=5)
    theirs = trl_utils.selective_log_softmax(trl_in, index, temperature)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)
    weights = torch.randn(ours.shape, generator=g).to(dtype)  # a non-uniform upstream gradient
    (ours * weights).sum().backward()
    (theirs * weights).sum().backward()
    torch.testing.assert_close(ours_in.grad, trl_in.grad, rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_selective_log_softmax_matches_trl_half(dtype):
    trl_utils = pytest.importorskip("trl.trainer.utils")
    g = torch.Generator().manual_seed(2)
    logits = (4 * torch.randn(3, 10, 64, generator=g)).to(dtype)
    index = torch.randint(0, 64, (3, 10), generator=g)
    ours_in, trl_in = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    ours = selective_log_softmax(ours_in, index)
    theirs = trl_utils.selective_log_softmax(trl_in, index)
    assert ours.dtype == dtype
    # both round a float32 result to the half dtype: at most about one ulp apart (1/128 relative in bf16)
    torch.testing.assert_close(ours.float(), theirs.float(), rtol=2e-2, atol=2e-2)
    ours.sum().backward()
    theirs.sum().backward()
    torch.testing.assert_close(ours_in.grad.float(), trl_in.grad.float(), rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------- 2b. against the naive log_softmax + gather


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 2e-5)])
@pytest.mark.parametrize("shift", [False, True])
@pytest.mark.parametrize("masking", ["ignore_index", "mask", "both"])
@pytest.mark.parametrize("chunk_size", [1, 4, 7, None])
@pytest.mark.parametrize("temperature", [1.0, 0.9])  # 1.0: softmax kernels; else via the saved logsumexp
def test_from_logits_matches_naive(dtype, tol, shift, masking, chunk_size, temperature):
    logits, labels, mask, *_ = make_case(dtype=dtype, seed=3)
    if masking == "mask":
        labels = labels.clamp(min=0)
    m = None if masking == "ignore_index" else mask
    x = logits.clone().requires_grad_()
    x_ref = logits.clone().requires_grad_()
    out = sequence_logprobs(x, labels, mask=m, shift=shift, chunk_size=chunk_size, temperature=temperature)
    per_token, total, keep = naive(x_ref, labels, mask=m, shift=shift, temperature=temperature)
    torch.testing.assert_close(out.per_token, per_token, rtol=0, atol=tol)
    torch.testing.assert_close(out.sum, total, rtol=0, atol=tol)
    assert torch.equal(out.mask, keep.to(dtype))
    weights = torch.linspace(0.5, 2.0, total.numel(), dtype=dtype)  # per-sequence weights, as a loss would
    (out.sum * weights).sum().backward()
    (total * weights).sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=0, atol=tol)


def test_from_logits_non_contiguous_input():
    # a logits view with strides (e.g. cut to the last positions, as TRL's GRPO does) is read in place
    logits, labels, mask, *_ = make_case(T=9, seed=4)
    big = logits.clone().requires_grad_()
    view = big[:, 2:]  # [B, 7, V], not contiguous
    out = sequence_logprobs(view, labels[:, 2:], chunk_size=3)
    per_token, total, _ = naive(big[:, 2:], labels[:, 2:])
    torch.testing.assert_close(out.per_token, per_token, rtol=0, atol=1e-10)
    grad, = torch.autograd.grad(out.sum.sum(), big)
    grad_ref, = torch.autograd.grad(total.sum(), big)
    torch.testing.assert_close(grad, grad_ref, rtol=0, atol=1e-10)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 2e-5)])
@pytest.mark.parametrize("shift", [False, True])
@pytest.mark.parametrize("use_bias", [False, True])
@pytest.mark.parametrize("chunk_size", [1, 5, 64, None])
@pytest.mark.parametrize("masked", [True, False])  # False: every row scored, read in place
def test_fused_matches_naive(dtype, tol, shift, use_bias, chunk_size, masked):
    _, labels, mask, hidden, weight, bias = make_case(dtype=dtype, seed=5)
    if not masked:
        labels, mask = labels.clamp(min=0), None
    h, w, b = (t.clone().requires_grad_() for t in (hidden, weight, bias))
    h_ref, w_ref, b_ref = (t.clone().requires_grad_() for t in (hidden, weight, bias))
    out = fused_sequence_logprobs(hidden_states=h, labels=labels, mask=mask, lm_head_weight=w,
                            lm_head_bias=b if use_bias else None, shift=shift, chunk_size=chunk_size,
                            temperature=1.3)
    logits_ref = h_ref @ w_ref.T + (b_ref if use_bias else 0)
    per_token, total, keep = naive(logits_ref, labels, mask=mask, shift=shift, temperature=1.3)
    torch.testing.assert_close(out.per_token, per_token, rtol=0, atol=tol)
    torch.testing.assert_close(out.sum, total, rtol=0, atol=tol)
    assert torch.equal(out.mask, keep.to(dtype))
    weights = torch.linspace(-1.0, 2.0, total.numel(), dtype=dtype)
    (out.sum * weights).sum().backward()
    (total * weights).sum().backward()
    torch.testing.assert_close(h.grad, h_ref.grad, rtol=0, atol=tol)
    torch.testing.assert_close(w.grad, w_ref.grad, rtol=0, atol=tol)
    if use_bias:
        torch.testing.assert_close(b.grad, b_ref.grad, rtol=0, atol=tol)
    else:
        assert b.grad is None


def test_fused_all_masked_gives_zeros_and_zero_grads():
    _, labels, _, hidden, weight, _ = make_case(seed=6)
    h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
    out = fused_sequence_logprobs(hidden_states=h, labels=torch.full_like(labels, -100), lm_head_weight=w)
    assert torch.equal(out.sum, torch.zeros(3, dtype=torch.float64))
    out.sum.sum().backward()
    assert torch.equal(h.grad, torch.zeros_like(h)) and torch.equal(w.grad, torch.zeros_like(w))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_inputs_compute_in_float32(dtype):
    logits, labels, mask, hidden, weight, bias = make_case(dtype=torch.float32, seed=7)
    x = logits.to(dtype).requires_grad_()
    out = sequence_logprobs(x, labels, mask=mask, shift=True, chunk_size=3)
    assert out.per_token.dtype == torch.float32
    # reference: the same half logits, upcast, then the naive float32 computation
    x_ref = logits.to(dtype).float().requires_grad_()
    per_token, total, _ = naive(x_ref, labels, mask=mask, shift=True)
    torch.testing.assert_close(out.per_token, per_token, rtol=0, atol=1e-5)
    out.sum.sum().backward()
    total.sum().backward()
    assert x.grad.dtype == dtype
    torch.testing.assert_close(x.grad.float(), x_ref.grad, rtol=1e-2, atol=1e-3)  # rounded once to half

    h, w, b = (t.to(dtype).requires_grad_() for t in (hidden, weight, bias))
    out = fused_sequence_logprobs(hidden_states=h, labels=labels, lm_head_weight=w, lm_head_bias=b, chunk_size=4)
    assert out.per_token.dtype == torch.float32
    # the reference rounds the logits to the half dtype too, as a half-precision lm_head would
    logits_ref = torch.nn.functional.linear(h.detach(), w.detach(), b.detach()).float()
    per_token, _, _ = naive(logits_ref, labels)
    torch.testing.assert_close(out.per_token, per_token, rtol=0, atol=1e-3)
    out.sum.sum().backward()
    assert h.grad.dtype == w.grad.dtype == b.grad.dtype == dtype
    assert all(torch.isfinite(t.grad.float()).all() for t in (h, w, b))


# ---------------------------------------------------------------- gradcheck (float64, tiny)


def test_gradcheck_selective_log_softmax():
    g = torch.Generator().manual_seed(8)
    logits = torch.randn(2, 3, 5, dtype=torch.float64, generator=g, requires_grad=True)
    index = torch.randint(0, 5, (2, 3, 2), generator=g)
    assert torch.autograd.gradcheck(lambda z: selective_log_softmax(z, index, 0.8, chunk_size=2), (logits,))


@pytest.mark.parametrize("temperature", [1.0, 1.5])
def test_gradcheck_from_logits(temperature):
    logits, labels, mask, *_ = make_case(B=2, T=4, V=5, seed=9)
    logits.requires_grad_()

    def fn(z):
        return sequence_logprobs(z, labels, mask=mask, shift=True, chunk_size=2, temperature=temperature).per_token

    assert torch.autograd.gradcheck(fn, (logits,))


def test_gradcheck_fused():
    _, labels, mask, hidden, weight, bias = make_case(B=2, T=4, V=6, H=3, seed=10, ignore_frac=0.2)
    inputs = tuple(t.clone().requires_grad_() for t in (hidden, weight, bias))

    def fn(h, w, b):
        return fused_sequence_logprobs(hidden_states=h, labels=labels, mask=mask, lm_head_weight=w, lm_head_bias=b,
                                 shift=True, chunk_size=2, temperature=0.9).per_token

    assert torch.autograd.gradcheck(fn, inputs)


# ---------------------------------------------------------------- no [N, V] tensor where none is needed


class LargestTensor(TorchDispatchMode):
    """Records the numel of the largest new tensor any aten op returns (views and in-place results skipped)."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        flat_in = torch.utils._pytree.tree_leaves((args, kwargs))
        seen = {t.untyped_storage().data_ptr() for t in flat_in if isinstance(t, torch.Tensor)}
        for t in torch.utils._pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in seen:
                self.largest = max(self.largest, t.numel())
        return out


def test_from_logits_forward_never_allocates_n_by_v():
    B, T, V = 2, 16, 50
    logits = torch.randn(B, T, V, requires_grad=True)
    labels = torch.randint(0, V, (B, T))
    with LargestTensor() as mode:
        out = sequence_logprobs(logits, labels, shift=True, chunk_size=4)
    assert mode.largest <= 4 * V  # one chunk; the naive version allocates B * T * V
    with LargestTensor() as mode:
        out.sum.sum().backward()
    assert mode.largest == B * T * V  # only the gradient itself (the naive backward makes three of these)


def test_fused_never_allocates_n_by_v():
    B, T, V, H = 2, 32, 40, 8  # H < N so the weight gradient [V, H] is smaller than [N, V]
    hidden = torch.randn(B, T, H, requires_grad=True)
    weight = torch.randn(V, H, requires_grad=True)
    labels = torch.randint(0, V, (B, T))
    with LargestTensor() as mode:
        out = fused_sequence_logprobs(hidden_states=hidden, labels=labels, lm_head_weight=weight, chunk_size=8)
        out.sum.sum().backward()
    assert mode.largest == max(8 * V, V * H, B * T * H)
    assert mode.largest < B * T * V


# ---------------------------------------------------------------- 3. properties (hypothesis)


@st.composite
def extreme_cases(draw):
    B, T, V = draw(st.integers(1, 3)), draw(st.integers(2, 5)), draw(st.integers(2, 6))
    values = st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False)
    logits = torch.tensor(draw(st.lists(values, min_size=B * T * V, max_size=B * T * V)), dtype=torch.float64)
    labels = torch.tensor(draw(st.lists(st.integers(-1, V - 1), min_size=B * T, max_size=B * T)))
    labels[labels < 0] = -100
    mask = torch.tensor(draw(st.lists(st.booleans(), min_size=B * T, max_size=B * T)))
    return logits.view(B, T, V), labels.view(B, T), mask.view(B, T), draw(st.booleans())


@settings(max_examples=60, deadline=None)
@given(case=extreme_cases(), dtype=st.sampled_from([torch.float32, torch.float64]), fused=st.booleans())
def test_property_finite_and_masked_rows_get_no_gradient(case, dtype, fused):
    logits, labels, mask, shift = case
    x = logits.to(dtype).requires_grad_()
    if fused:
        # identity head: the logits are the hidden states, so the same extreme values reach the softmax
        V = x.shape[-1]
        w = torch.eye(V, dtype=dtype, requires_grad=True)
        out = fused_sequence_logprobs(hidden_states=x, labels=labels, mask=mask, lm_head_weight=w, shift=shift, chunk_size=3)
    else:
        out = sequence_logprobs(x, labels, mask=mask, shift=shift, chunk_size=3)
    assert torch.isfinite(out.per_token).all() and torch.isfinite(out.sum).all()
    assert (out.per_token <= 0).all()  # log of a probability
    assert (out.per_token[out.mask == 0] == 0).all()
    out.sum.sum().backward()
    assert torch.isfinite(x.grad).all()
    rows = x.grad[:, :-1] if shift else x.grad  # rows that score a label
    assert (rows[out.mask == 0] == 0).all()  # masked positions pass no gradient
    if shift:
        assert (x.grad[:, -1] == 0).all()  # the last position predicts nothing
    # each kept row's gradient onehot - softmax sums to 0 over the vocabulary
    torch.testing.assert_close(rows.sum(-1), torch.zeros_like(rows.sum(-1)), rtol=0, atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(case=extreme_cases(), offset=st.floats(-1e3, 1e3))
def test_property_invariant_to_adding_a_constant_per_row(case, offset):
    # softmax(z + c) = softmax(z): log-probs do not move when a row is shifted by any constant
    logits, labels, mask, shift = case
    offsets = offset * torch.linspace(-1, 1, logits.shape[0] * logits.shape[1], dtype=torch.float64)
    moved = logits + offsets.view(*logits.shape[:2], 1)
    a = sequence_logprobs(logits, labels, mask=mask, shift=shift)
    b = sequence_logprobs(moved, labels, mask=mask, shift=shift)
    torch.testing.assert_close(a.per_token, b.per_token, rtol=1e-9, atol=1e-8)


# ---------------------------------------------------------------- errors name the argument and the shapes


# B=2, T=5, V=7, H=4
_L, _Y, _M, _HS, _W, _BIAS = make_case(B=2, T=5, V=7, H=4)
_ERRORS = [
    pytest.param(dict(labels=_Y), r"logits: got neither logits \[B, T, V\] nor hidden_states", id="neither"),
    pytest.param(dict(logits=_L, labels=_Y, hidden_states=_HS, lm_head_weight=_W),
                 r"logits: got both logits \(2, 5, 7\) and hidden_states \(2, 5, 4\)", id="both"),
    pytest.param(dict(logits=_L, labels=_Y[:, :4]), r"labels: expected shape \(2, 5\) .* got shape \(2, 4\)",
                 id="labels-shape"),
    pytest.param(dict(logits=_L), r"labels: required, expected shape \(2, 5\)", id="labels-missing"),
    pytest.param(dict(logits=_L, labels=_Y, mask=_M[:1]), r"mask: expected shape \(2, 5\) .* got shape \(1, 5\)",
                 id="mask-shape"),
    pytest.param(dict(logits=_L[0], labels=_Y), r"logits: expected shape \[B, T, V\], got shape \(5, 7\)",
                 id="logits-ndim"),
    pytest.param(dict(hidden_states=_HS, labels=_Y),
                 r"lm_head_weight: required with hidden_states, expected shape \(V, 4\), got None",
                 id="weight-missing"),
    pytest.param(dict(hidden_states=_HS, labels=_Y, lm_head_weight=_W[:, :3]),
                 r"lm_head_weight: expected shape \(V, 4\) .* got shape \(7, 3\)", id="hidden-size"),
    pytest.param(dict(hidden_states=_HS, labels=_Y, lm_head_weight=_W, lm_head_bias=_BIAS[:6]),
                 r"lm_head_bias: expected shape \(7,\), got shape \(6,\)", id="bias-shape"),
    pytest.param(dict(hidden_states=_HS, labels=_Y, lm_head_weight=_W.float()),
                 r"lm_head_weight: expected dtype torch.float64", id="weight-dtype"),
    pytest.param(dict(logits=_L, labels=_Y, lm_head_weight=_W), r"lm_head_weight: only used with hidden_states",
                 id="weight-with-logits"),
    pytest.param(dict(logits=_L, labels=_Y.clamp(min=0) + 7),
                 r"labels: token ids must lie in \[0, V\) = \[0, 7\), got", id="labels-range"),
    pytest.param(dict(logits=_L, labels=_Y.double()), r"labels: expected an integer", id="labels-dtype"),
    pytest.param(dict(logits=_L[:, :1], labels=_Y[:, :1], shift=True), r"labels: shift=True needs T >= 2",
                 id="shift-too-short"),
    pytest.param(dict(logits=_L, labels=_Y, chunk_size=0), r"chunk_size: expected None or a positive int",
                 id="chunk-size"),
    pytest.param(dict(logits=_L, labels=_Y, temperature=0.0), r"temperature: expected a finite value > 0",
                 id="temperature"),
    pytest.param(dict(logits=_Y, labels=_Y), r"logits: expected a floating-point tensor", id="logits-dtype"),
]


@pytest.mark.parametrize("kwargs,match", _ERRORS)
def test_sequence_logprobs_errors(kwargs, match):
    """Input checks, through the shared implementation of both public functions (which name the
    argument the same way)."""
    with pytest.raises(ValueError, match=match):
        _sequence_logprobs(**kwargs)


def test_the_two_public_functions_share_their_checks():
    with pytest.raises(ValueError, match=r"labels: expected shape \(2, 5\)"):
        sequence_logprobs(_L, _Y[:, :4])
    with pytest.raises(ValueError, match=r"lm_head_weight: expected shape \(V, 4\)"):
        fused_sequence_logprobs(_HS, _W[:, :3], _Y)


def test_ignored_positions_may_hold_any_label():
    # -100 and out-of-range ids are fine where masked: they are never read
    logits, labels = _L, _Y
    mask = torch.ones_like(labels)
    mask[:, 0] = 0
    labels = labels.clamp(min=0)
    labels[:, 0] = 999
    assert torch.isfinite(sequence_logprobs(logits, labels, mask=mask).sum).all()


def test_selective_log_softmax_errors():
    logits = torch.randn(2, 5, 7)
    with pytest.raises(ValueError, match=r"index: expected shape \(2, 5\) .* got shape \(2, 4\)"):
        selective_log_softmax(logits, torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"index: token ids must lie in \[0, V\) = \[0, 7\), got -100"):
        selective_log_softmax(logits, torch.full((2, 5), -100))
    with pytest.raises(ValueError, match=r"index: expected an integer"):
        selective_log_softmax(logits, torch.zeros(2, 5))
    with pytest.raises(ValueError, match=r"logits: expected a floating-point tensor"):
        selective_log_softmax(torch.zeros(2, 5, 7, dtype=torch.long), torch.zeros(2, 5, dtype=torch.long))
