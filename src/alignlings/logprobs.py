"""Per-token and per-sequence log-probabilities of chosen tokens, without the [B, T, V] log-softmax.

Every preference-alignment loss (DPO, GRPO, PPO) starts from log pi(y_t | y_<t) of the tokens in the
batch. The textbook version, ``logits.log_softmax(-1).gather(-1, labels)``, allocates a [B, T, V]
log-softmax and, in backward, two more [B, T, V] buffers, although only B*T numbers are kept. With
V = 151936 (Qwen) that is 2.5 GB per copy at B*T = 4096 in float32.

This module computes the same numbers with

    log p(y) = z_y - logsumexp(z),            d log p(y) / dz = onehot(y) - softmax(z)

over chunks of rows, so that only one chunk of exponentials exists at a time:

* ``selective_log_softmax(logits, index)``: the same values as TRL's
  ``trl.trainer.utils.selective_log_softmax`` (chosen logit minus a logsumexp in float32/64; in
  bf16/fp16 the softmax runs in float32 and the result is rounded to the input dtype, where TRL
  takes a bf16 log_softmax), with a custom backward.
* ``sequence_logprobs(...)``: per-token log-probs [B, T], their masked sum [B] and the mask, from
  logits (``_LogSoftmaxGather``: saves only the logits the caller holds anyway, and one logsumexp per
  row where the backward needs it, and recomputes the softmax chunk by chunk in backward; peak extra
  memory is one chunk, where the naive version holds two [B, T, V] tensors besides the gradient,
  and it streams fewer [B, T, V] passes through memory, so it is also faster) or fused from the last
  hidden states and
  the LM head (``_LinearLogSoftmaxGather``: logits are computed ``chunk_size`` rows at a time, in
  forward and again in backward, so the [N, V] logits never exist). The fused path is the idea of
  TRL's ``trl/kernels/chunked_logprob.py`` and Liger-Kernel's fused linear cross-entropy, written
  in plain torch ops so it runs anywhere.

Small logits (at most ``_SMALL_ELEMENTS``, no ``chunk_size`` given) skip the chunking: one
``log_softmax`` and a gather under autograd, the same forward values, where the chunked Function's
fixed cost per call would outweigh the memory it saves.

Notation: B batch, T sequence length, V vocabulary, H hidden size, N = B*T rows, K indices per row.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch.autograd.function import once_differentiable

from alignlings._validate import check_floating

# From-logits path: rows per chunk default to about this many elements (32 MiB in float32: 256 rows
# at V = 32000, 55 at V = 151936). On an idle 2-core CPU anything from 2**18 up is about as fast (and
# 2-3x faster than the naive version, which streams three [N, V] tensors through memory); on a loaded
# one, large chunks win, since every pass over a chunk is an OpenMP fork/join that waits for a
# descheduled thread. Measured with benchmarks/bench_logprobs.py; the memory stays 1-6% of the logits.
_LOGITS_CHUNK_ELEMENTS = 2**23
# From-logits path without a chunk size: logits of at most this many elements (256 KiB in float32: a
# tiny model's batch, such as the trainer benchmark's 2 x 64 GPT-2 with 14 tokens) take one plain
# log_softmax + gather, whose extra [N, V] buffers are small; the chunked Function's fixed Python cost
# per call (~50 us forward, ~90 us backward) is then a tenth of a tiny DPO step.
_SMALL_ELEMENTS = 2**16
# Fused path: rows per chunk. The chunk's [rows, V] logits are the one large buffer (16 MB at
# V = 32000) next to the BLAS library's own packing buffers (~10-30 MB, growing with rows); 128 rows
# keep the matrix products efficient (each chunk streams the [V, H] weight once) and the peak under
# a tenth of the [N, V] logits from N = 4096 on.
_FUSED_CHUNK_ROWS = 128


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    # exp/sum over V in bf16/fp16 loses the small probabilities; chunks are upcast instead
    return dtype if dtype in (torch.float32, torch.float64) else torch.float32


def _max_sumexp(z: torch.Tensor, work: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Row max m and s = sum exp(z - m) of z [n, V], using ``work`` [n, V] (may be z itself) for exp(z - m).

    logsumexp(z) = log(s) + m is then computed with the same operations as ``torch.logsumexp``
    (ATen: amax, maxes at +-inf replaced by 0, exp, sum, log, add), so bitwise identical, but without
    its [n, V] temporary: every chunk reuses one buffer, so the loop allocates nothing large (a fresh
    multi-MB block per chunk means an mmap, page faults and an munmap each time).
    """
    m = z.amax(-1)  # [n]
    m.masked_fill_(m.abs() == float("inf"), 0.0)
    torch.sub(z, m.unsqueeze(-1), out=work).exp_()
    return m, work.sum(-1)


def _scaled(z: torch.Tensor, temperature: float, work: torch.Tensor) -> torch.Tensor:
    """z / temperature in the dtype of ``work``: z itself when that changes nothing, else written into work."""
    if work.dtype == z.dtype:
        return z if temperature == 1.0 else torch.div(z, temperature, out=work)
    work.copy_(z)  # upcast first: dividing a bf16 tensor would round the quotient to bf16
    return work if temperature == 1.0 else work.div_(temperature)


def _row_chunks(A: int, T: int, rows: int):
    """(a, t0, t1) covering the [A, T] grid with at most ``rows`` rows of one ``a`` per chunk."""
    for a in range(A):
        for t0 in range(0, T, rows):
            yield a, t0, min(t0 + rows, T)


class _LogSoftmaxGather(torch.autograd.Function):
    """log_softmax(logits / temperature)[index] over chunks of rows; backward recomputes the softmax.

    logits: [A, T, V], any strides. index: [A, T_out, K] with T_out <= T; row t of ``index`` reads row
    t of ``logits`` (so ``T_out = T - 1`` drops the last position, for shifted causal-LM labels, without
    slicing ``logits``: a slice would make autograd allocate another [A, T, V] zero gradient).
    Returns [A, T_out, K] in ``out_dtype``.

    ``exact=True`` computes z_y - logsumexp(z) with the operations of TRL's selective_log_softmax,
    and the backward softmax as exp(z - logsumexp(z)) as autograd does for it: bitwise the same
    values, gradients to an ulp. Otherwise float32/64 logits at temperature 1 go through one
    ``log_softmax`` kernel per chunk in forward and one ``softmax`` kernel in backward (one pass over
    each chunk where the logsumexp route makes four; on CPU every pass is an OpenMP fork/join, which a
    loaded machine makes slow), and other cases keep the row max m and 1/s, s = sum exp(z - m), and
    recompute softmax = exp(z - m) / s. Both avoid exp(z - logsumexp): logsumexp carries a rounding
    error of about |logsumexp| * eps, 5e-4 in float32 for logits near 1e4, which exp turns into the
    same relative error on every probability, so a gradient row would no longer sum to 0.

    Saved: the logits (the caller holds them anyway), the index and, unless the softmax kernel is
    used, two floats per row. The backward recomputes each chunk's softmax.
    """

    @staticmethod
    def forward(ctx, logits, index, temperature, rows, out_dtype, exact):
        A, T_out, K = index.shape
        V = logits.shape[-1]
        compute = _compute_dtype(logits.dtype)
        # float32/64 at temperature 1: the softmax can be read straight from the logits, no copy
        direct = compute == logits.dtype and temperature == 1.0
        if logits.is_contiguous() and T_out == logits.shape[1]:
            # one long run of rows: chunks may cross sequence boundaries
            logits, index = logits.view(1, A * T_out, V), index.reshape(1, A * T_out, K)
        logps = torch.empty(index.shape, dtype=compute, device=logits.device)  # [A', T', K]
        # softmax = exp(z - shift) * scale: kept for backward unless the softmax kernel can recompute it
        stats = None if (direct and not exact) else torch.empty(
            2, *index.shape[:2], dtype=compute, device=logits.device)  # [2, A', T']
        work = torch.empty(min(rows, index.shape[1]), V, dtype=compute, device=logits.device)
        for a, t0, t1 in _row_chunks(index.shape[0], index.shape[1], rows):
            w, idx = work[: t1 - t0], index[a, t0:t1]
            if stats is None:
                logps[a, t0:t1] = torch.log_softmax(logits[a, t0:t1], -1, out=w).gather(-1, idx)
                continue
            z = _scaled(logits[a, t0:t1], temperature, w)  # [n, V]
            selected = z.gather(-1, idx)  # before _max_sumexp overwrites w, which may be z
            m, sumexp = _max_sumexp(z, w)
            lse = sumexp.log().add_(m)
            logps[a, t0:t1] = selected - lse.unsqueeze(-1)  # log p = z_y - logsumexp(z)
            if exact:
                stats[0, a, t0:t1], stats[1, a, t0:t1] = lse, 1.0
            else:
                stats[0, a, t0:t1], stats[1, a, t0:t1] = m, sumexp.reciprocal_()
        ctx.save_for_backward(logits, index, stats)
        ctx.shape, ctx.temperature, ctx.rows = (A, T_out, K), temperature, rows
        return logps.to(out_dtype).view(A, T_out, K)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_logps):
        logits, index, stats = ctx.saved_tensors  # logits possibly flattened to [1, N, V] in forward
        A, T_out, K = ctx.shape
        if not ctx.needs_input_grad[0]:
            return None, None, None, None, None, None
        compute = _compute_dtype(logits.dtype)
        # d log p_k / d logits = (onehot(index_k) - softmax(logits / temperature)) / temperature
        g = grad_logps.to(compute).reshape(index.shape) / ctx.temperature  # [A', T', K]
        g_row = g.sum(-1)  # [A', T']: each of the K log-probs pulls on the same softmax
        grad = torch.empty(logits.shape, dtype=logits.dtype, device=logits.device)
        if grad.shape[1] > index.shape[1]:
            grad[:, index.shape[1]:].zero_()  # positions that predict nothing (shift=True)
        # written straight into the gradient when possible; else via one chunk buffer
        work = None if stats is None or compute == logits.dtype else torch.empty(
            min(ctx.rows, index.shape[1]), logits.shape[-1], dtype=compute, device=logits.device)
        for a, t0, t1 in _row_chunks(index.shape[0], index.shape[1], ctx.rows):
            out = grad[a, t0:t1]
            if stats is None:
                p = torch.softmax(logits[a, t0:t1], -1, out=out)  # one kernel: max, exp, normalise
                p.mul_(-g_row[a, t0:t1].unsqueeze(-1))
            else:
                p = out if work is None else work[: t1 - t0]
                z = _scaled(logits[a, t0:t1], ctx.temperature, p)
                shift, scale = stats[0, a, t0:t1].unsqueeze(-1), stats[1, a, t0:t1].unsqueeze(-1)
                torch.sub(z, shift, out=p).exp_().mul_(-g_row[a, t0:t1].unsqueeze(-1) * scale)
            p.scatter_add_(-1, index[a, t0:t1], g[a, t0:t1])
            if p is not out:
                out.copy_(p)
        # forward may have viewed contiguous [A, T, V] logits as [1, A*T, V]; give back the input's shape
        return grad.view(A, -1, grad.shape[-1]), None, None, None, None, None


class _LinearLogSoftmaxGather(torch.autograd.Function):
    """log_softmax((hidden[rows] @ weight.T + bias) / temperature)[index], ``chunk`` rows at a time.

    hidden: [R, H] (all positions, a view of the caller's hidden states), row_ids: [M] rows of
    ``hidden`` to score, or None for all R in order; weight: [V, H], bias: [V] or None, index: [M].
    Returns [M] in float32 for bf16/fp16 inputs, else in the input dtype. Saves hidden, weight, bias,
    the indices and per row the max m and 1/s, s = sum exp(z - m) (see _LogSoftmaxGather for why not
    the logsumexp); backward recomputes each chunk's logits and turns them into their gradient in
    place. The only [*, V] buffer is one chunk's logits.
    """

    @staticmethod
    def forward(ctx, hidden, weight, bias, row_ids, index, temperature, chunk):
        M, V = index.shape[0], weight.shape[0]
        compute = _compute_dtype(hidden.dtype)
        logps = torch.empty(M, dtype=compute, device=hidden.device)
        stats = torch.empty(2, M, dtype=compute, device=hidden.device)  # row max m, 1 / sum exp(z - m)
        buf = torch.empty(min(M, chunk), V, dtype=hidden.dtype, device=hidden.device)
        up = None if compute == hidden.dtype else torch.empty(buf.shape, dtype=compute, device=buf.device)
        for r0 in range(0, M, chunk):
            r1 = min(r0 + chunk, M)
            h = hidden[r0:r1] if row_ids is None else hidden.index_select(0, row_ids[r0:r1])  # [n, H]
            z = _chunk_logits(h, weight, bias, temperature, buf, up)  # [n, V]
            selected = z.gather(-1, index[r0:r1].unsqueeze(-1)).squeeze(-1)
            m, sumexp = _max_sumexp(z, z)  # overwrites z, which is no longer needed
            logps[r0:r1] = selected - sumexp.log().add_(m)
            stats[0, r0:r1], stats[1, r0:r1] = m, sumexp.reciprocal_()
        ctx.save_for_backward(hidden, weight, bias, row_ids, index, stats)
        ctx.temperature, ctx.chunk = temperature, chunk
        return logps

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_logps):
        hidden, weight, bias, row_ids, index, stats = ctx.saved_tensors
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        M, V, chunk = index.shape[0], weight.shape[0], ctx.chunk
        compute = stats.dtype
        g = grad_logps.to(compute) / ctx.temperature  # [M]
        grad_hidden = None
        if need_h:  # rows that were not scored get exactly zero
            grad_hidden = torch.empty_like(hidden) if row_ids is None else torch.zeros_like(hidden)
        # accumulated over chunks in float32 at least: summing many bf16 partial products drifts
        grad_weight = torch.zeros(weight.shape, dtype=compute, device=weight.device) if need_w else None
        grad_bias = torch.zeros(V, dtype=compute, device=weight.device) if need_b else None
        if M > 0:
            buf = torch.empty(min(M, chunk), V, dtype=hidden.dtype, device=hidden.device)
            up = None if compute == hidden.dtype else torch.empty(buf.shape, dtype=compute, device=buf.device)
        for r0 in range(0, M, chunk):
            r1 = min(r0 + chunk, M)
            h = hidden[r0:r1] if row_ids is None else hidden.index_select(0, row_ids[r0:r1])  # [n, H]
            dz = _chunk_logits(h, weight, bias, ctx.temperature, buf, up)  # [n, V]
            # dL/dz = g * (onehot(index) - softmax(z)), built in place over the recomputed logits
            dz.sub_(stats[0, r0:r1].unsqueeze(-1)).exp_().mul_((-g[r0:r1] * stats[1, r0:r1]).unsqueeze(-1))
            dz.scatter_add_(-1, index[r0:r1].unsqueeze(-1), g[r0:r1].unsqueeze(-1))
            if need_h:
                dz_in = dz if dz.dtype == hidden.dtype else buf[: r1 - r0].copy_(dz)
                if row_ids is None:
                    torch.mm(dz_in, weight, out=grad_hidden[r0:r1])  # [n, V] @ [V, H]
                else:
                    grad_hidden.index_copy_(0, row_ids[r0:r1], dz_in @ weight)
            if need_w:
                grad_weight.addmm_(dz.t(), h.to(compute))  # [V, n] @ [n, H]
            if need_b:
                grad_bias.add_(dz.sum(0))
        if need_w:
            grad_weight = grad_weight.to(weight.dtype)
        if need_b:
            grad_bias = grad_bias.to(bias.dtype)
        return grad_hidden, grad_weight, grad_bias, None, None, None, None


def _chunk_logits(h, weight, bias, temperature, buf, up):
    """(h @ weight.T + bias) / temperature for one chunk, in ``buf`` (input dtype), upcast into ``up`` if given."""
    z = buf[: h.shape[0]]
    if bias is None:
        torch.mm(h, weight.t(), out=z)
    else:
        torch.addmm(bias, h, weight.t(), out=z)
    if up is not None:
        # bf16/fp16: the product is rounded to the input dtype as the model's own lm_head would
        # round it; the softmax and everything after it run in float32
        z = up[: h.shape[0]].copy_(z)
    if temperature != 1.0:
        z.div_(temperature)
    return z


def _check_index(name: str, index: torch.Tensor, V: int) -> None:
    if index.dtype.is_floating_point or index.dtype.is_complex or index.dtype == torch.bool:
        raise ValueError(f"{name}: expected an integer (long) tensor of token ids, got dtype {index.dtype}")
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= V):
        bad = index[(index < 0) | (index >= V)][0].item()
        raise ValueError(f"{name}: token ids must lie in [0, V) = [0, {V}), got {bad}")


def _check_temperature(temperature: float) -> None:
    if not temperature > 0 or temperature == float("inf"):
        raise ValueError(f"temperature: expected a finite value > 0, got {temperature!r}")


def _check_chunk_size(chunk_size: int | None) -> None:
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"chunk_size: expected None or a positive int (rows per chunk), got {chunk_size!r}")


def selective_log_softmax(
    logits: torch.Tensor,
    index: torch.Tensor,
    temperature: float = 1.0,
    *,
    chunk_size: int | None = None,
) -> torch.Tensor:
    """``log_softmax(logits / temperature).gather(-1, index)`` without the full log-softmax.

    Same values as TRL's ``trl.trainer.utils.selective_log_softmax`` (bitwise in float32/64: the same
    operations, chosen logit minus logsumexp, per chunk of rows instead of per batch row) and the
    same gradient to ~1e-7; a custom backward recomputes the softmax chunk by chunk, so no [..., V]
    tensor besides the gradient itself is ever allocated.

    Args:
        logits: [..., V] floating point.
        index: [...] (one token per position) or [..., K] (K tokens per position, e.g. top-K), integer,
            every value in [0, V). There is no ignore index here; see ``sequence_logprobs`` for masks.
        temperature: the logits are divided by it first (TRL's GRPO samples at a temperature).
        chunk_size: rows per chunk, default about 2**23 / V (at least 1).

    Returns:
        log-probabilities, shaped like ``index``, in the logits' dtype. For bf16/fp16 the softmax is
        computed in float32 and the result rounded to the input dtype.
    """
    check_floating("logits", logits)
    _check_temperature(temperature)
    _check_chunk_size(chunk_size)
    if logits.dim() < 1:
        raise ValueError(f"logits: expected shape [..., V], got shape {tuple(logits.shape)}")
    squeeze = index.dim() == logits.dim() - 1
    expected = tuple(logits.shape[:-1]) + (() if squeeze else ("K",))
    if index.shape[: logits.dim() - 1] != logits.shape[:-1] or index.dim() not in (logits.dim() - 1, logits.dim()):
        raise ValueError(
            f"index: expected shape {expected} (logits {tuple(logits.shape)} without V), got shape {tuple(index.shape)}"
        )
    V = logits.shape[-1]
    _check_index("index", index, V)
    batch_shape = logits.shape[:-1]
    # [A, T, V]: a view for the usual (sliced) [B, T, V] logits, so no copy is made
    if logits.dim() == 1:
        logits3 = logits.view(1, 1, V)
    else:
        logits3 = logits.reshape(-1, logits.shape[-2], V)
    K = 1 if squeeze else index.shape[-1]
    index3 = index.reshape(logits3.shape[0], logits3.shape[1], K).long()
    rows = chunk_size or max(1, _LOGITS_CHUNK_ELEMENTS // max(V, 1))
    logps = _LogSoftmaxGather.apply(logits3, index3, float(temperature), rows, logits.dtype, True)
    return logps.reshape(batch_shape if squeeze else index.shape)


class SequenceLogProbs(NamedTuple):
    """Result of ``sequence_logprobs``; unpacks as ``per_token, sum, mask = ...``.

    per_token: [B, T'] log p of each label, 0 where masked (T' = T, or T - 1 with ``shift=True``).
    sum: [B] sum of ``per_token`` over the kept tokens (DPO's sequence log-prob).
    mask: [B, T'] 1.0 for kept tokens, 0.0 for ignored ones, in the dtype of ``per_token``.
    """

    per_token: torch.Tensor
    sum: torch.Tensor
    mask: torch.Tensor

    @property
    def mean(self) -> torch.Tensor:
        """[B] mean log-prob over kept tokens (0 for a sequence with none); IPO's length normalisation."""
        return self.sum / self.mask.sum(-1).clamp(min=1)


def _shape_str(shape) -> str:
    return str(tuple(shape))


def sequence_logprobs(
    logits: torch.Tensor,
    labels: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    shift: bool = False,
    ignore_index: int = -100,
    temperature: float = 1.0,
    chunk_size: int | None = None,
) -> SequenceLogProbs:
    """Log-probabilities of ``labels`` per token and summed per sequence, from ``logits`` [B, T, V].

    The softmax runs ``chunk_size`` rows at a time, so no [B, T, V] log-softmax is ever allocated.
    Alignment, ``mask``, ``ignore_index``, ``temperature`` and the result are as in
    ``_sequence_logprobs`` (below); ``fused_sequence_logprobs`` starts from hidden states instead.
    """
    return _sequence_logprobs(logits, labels, mask=mask, shift=shift, ignore_index=ignore_index,
                              temperature=temperature, chunk_size=chunk_size)


def fused_sequence_logprobs(
    hidden_states: torch.Tensor,
    lm_head_weight: torch.Tensor,
    labels: torch.Tensor,
    *,
    lm_head_bias: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    shift: bool = False,
    ignore_index: int = -100,
    temperature: float = 1.0,
    chunk_size: int | None = None,
) -> SequenceLogProbs:
    """Log-probabilities of ``labels`` fused from ``hidden_states`` [B, T, H] and the LM head
    (``lm_head_weight`` [V, H], optional ``lm_head_bias`` [V]): the logits are computed
    ``chunk_size`` rows at a time and never held whole, in forward or backward. For a model, pass
    the last hidden state and ``model.get_output_embeddings().weight``. Everything else is as in
    ``sequence_logprobs``."""
    return _sequence_logprobs(labels=labels, mask=mask, hidden_states=hidden_states, lm_head_weight=lm_head_weight,
                              lm_head_bias=lm_head_bias, shift=shift, ignore_index=ignore_index,
                              temperature=temperature, chunk_size=chunk_size)


def _sequence_logprobs(
    logits: torch.Tensor | None = None,
    labels: torch.Tensor | None = None,
    *,
    mask: torch.Tensor | None = None,
    hidden_states: torch.Tensor | None = None,
    lm_head_weight: torch.Tensor | None = None,
    lm_head_bias: torch.Tensor | None = None,
    shift: bool = False,
    ignore_index: int = -100,
    temperature: float = 1.0,
    chunk_size: int | None = None,
) -> SequenceLogProbs:
    """Log-probabilities of ``labels`` per token and summed per sequence, from logits or fused from hidden states.

    Give exactly one of
      * ``logits`` [B, T, V], or
      * ``hidden_states`` [B, T, H] with ``lm_head_weight`` [V, H] (and optionally ``lm_head_bias``
        [V]): logits = hidden_states @ lm_head_weight.T + lm_head_bias are computed ``chunk_size`` rows
        at a time and never held whole, in forward or backward (for a model, pass the last hidden
        state and ``model.lm_head.weight``; ``model.get_output_embeddings()`` finds the head).

    Alignment: with ``shift=False`` (default) position t of the logits scores ``labels[:, t]``; this is
    the layout of TRL's GRPO (logits already cut to the completion, labels = completion ids). With
    ``shift=True`` the causal-LM shift is done here: logits at t score ``labels[:, t + 1]``, so a
    trainer passes the model's logits and ``input_ids`` (and a mask aligned with ``input_ids``), and
    the outputs have T - 1 positions, aligned with ``labels[:, 1:]``.

    Args:
        logits: [B, T, V] floating point.
        labels: [B, T] integer token ids; positions equal to ``ignore_index`` are not scored.
        mask: optional [B, T] 0/1 (or bool) mask aligned with ``labels``; nonzero means kept.
            Combined with ``ignore_index`` by AND.
        hidden_states, lm_head_weight, lm_head_bias: the fused alternative to ``logits``; same dtype.
        shift: see above.
        ignore_index: label value that marks positions to ignore (default -100, as in Hugging Face).
        temperature: logits are divided by it before the softmax (TRL's GRPO ``temperature``).
        chunk_size: rows (tokens) per chunk. Default: about 2**23 / V rows from logits, 128 fused.
            Larger is faster up to a point and uses chunk_size * V more elements of memory.

    Returns:
        ``SequenceLogProbs(per_token [B, T'], sum [B], mask [B, T'])``, T' = T or T - 1 with shift.
        Values are float32 for bf16/fp16 inputs (the softmax runs in float32 in chunks), otherwise in
        the input dtype. Masked positions are exactly 0 and pass no gradient.
    """
    _check_temperature(temperature)
    _check_chunk_size(chunk_size)
    if logits is None and hidden_states is None:
        raise ValueError(
            "logits: got neither logits [B, T, V] nor hidden_states [B, T, H] (with lm_head_weight [V, H]); "
            "pass exactly one"
        )
    if logits is not None and hidden_states is not None:
        raise ValueError(
            f"logits: got both logits {_shape_str(logits.shape)} and hidden_states "
            f"{_shape_str(hidden_states.shape)}; pass exactly one"
        )
    fused = hidden_states is not None
    source_name, source = ("hidden_states", hidden_states) if fused else ("logits", logits)
    check_floating(source_name, source)
    if source.dim() != 3:
        dims = "[B, T, H]" if fused else "[B, T, V]"
        raise ValueError(f"{source_name}: expected shape {dims}, got shape {_shape_str(source.shape)}")
    B, T = source.shape[:2]
    if fused:
        H = source.shape[-1]
        if lm_head_weight is None:
            raise ValueError(f"lm_head_weight: required with hidden_states, expected shape (V, {H}), got None")
        check_floating("lm_head_weight", lm_head_weight)
        if lm_head_weight.dim() != 2 or lm_head_weight.shape[1] != H:
            raise ValueError(
                f"lm_head_weight: expected shape (V, {H}) (H from hidden_states {_shape_str(source.shape)}), "
                f"got shape {_shape_str(lm_head_weight.shape)}"
            )
        V = lm_head_weight.shape[0]
        if lm_head_bias is not None and lm_head_bias.shape != (V,):
            raise ValueError(f"lm_head_bias: expected shape ({V},), got shape {_shape_str(lm_head_bias.shape)}")
        for name, t in (("lm_head_weight", lm_head_weight), ("lm_head_bias", lm_head_bias)):
            if t is not None and t.dtype != source.dtype:
                raise ValueError(f"{name}: expected dtype {source.dtype} (that of hidden_states), got {t.dtype}")
    else:
        for name, t in (("lm_head_weight", lm_head_weight), ("lm_head_bias", lm_head_bias)):
            if t is not None:
                raise ValueError(f"{name}: only used with hidden_states, got it with logits; pass one or the other")
        V = source.shape[-1]
    if labels is None:
        raise ValueError(f"labels: required, expected shape ({B}, {T}) of token ids, got None")
    if labels.shape != (B, T):
        raise ValueError(
            f"labels: expected shape ({B}, {T}) ([B, T] of {source_name} {_shape_str(source.shape)}), "
            f"got shape {_shape_str(labels.shape)}"
        )
    if mask is not None and mask.shape != (B, T):
        raise ValueError(
            f"mask: expected shape ({B}, {T}) (the shape of labels), got shape {_shape_str(mask.shape)}"
        )
    if shift and T < 2:
        raise ValueError(f"labels: shift=True needs T >= 2 positions, got shape {_shape_str(labels.shape)}")

    if shift:
        labels = labels[:, 1:]  # logits at t predict token t + 1
        mask = None if mask is None else mask[:, 1:]
    T_out = labels.shape[1]
    keep = labels != ignore_index  # [B, T']
    if mask is not None:
        keep = keep & mask.bool()
    safe_labels = torch.where(keep, labels, torch.zeros_like(labels))  # ignored rows read token 0
    _check_index("labels", safe_labels, V)
    out_dtype = _compute_dtype(source.dtype)

    if fused:
        # only kept rows go through the LM head (prompt tokens in DPO cost nothing), picked chunk by
        # chunk from a view of hidden_states, so not even the [N, H] rows are copied
        flat = source.reshape(B * T, source.shape[-1])  # [B*T, H]
        if shift or not bool(keep.all()):
            b, t = keep.nonzero(as_tuple=True)
            row_ids = b * T + t  # [M], in the row-major order of labels[keep]
        else:
            row_ids = None
        logps_kept = _LinearLogSoftmaxGather.apply(
            flat, lm_head_weight, lm_head_bias, row_ids, safe_labels[keep].long(), float(temperature),
            chunk_size or _FUSED_CHUNK_ROWS,
        )  # [M]
        if row_ids is None:
            per_token = logps_kept.view(B, T_out)
        else:
            per_token = torch.zeros(B, T_out, dtype=out_dtype, device=source.device).index_put((keep,), logps_kept)
    elif chunk_size is None and B * T * V <= _SMALL_ELEMENTS:
        # small logits: one log_softmax and a gather under autograd (the same forward values as the
        # chunked Function's float32 path; its per-call Python work would cost more than it saves)
        z = source if source.dtype == out_dtype else source.to(out_dtype)
        z = z if temperature == 1.0 else z / temperature
        logp = torch.log_softmax(z, dim=-1)  # [B, T, V]
        logps = (logp[:, :-1] if shift else logp).gather(-1, safe_labels.long().unsqueeze(-1)).squeeze(-1)
        per_token = torch.where(keep, logps, torch.zeros((), dtype=logps.dtype, device=logps.device))
    else:
        rows = chunk_size or max(1, _LOGITS_CHUNK_ELEMENTS // max(V, 1))
        index = safe_labels.long().unsqueeze(-1)  # [B, T', 1]
        padded = shift and source.is_contiguous()
        if padded:
            # one run of B*T rows instead of a loop over sequences: the last position scores a dummy
            # token 0 and is dropped (its output gets no gradient, so it adds none to the logits)
            index = torch.cat([index, index.new_zeros(B, 1, 1)], dim=1)  # [B, T, 1]
        # the full [B, T, V] logits go in; T' < T only skips their last position (see _LogSoftmaxGather)
        logps = _LogSoftmaxGather.apply(source, index, float(temperature), rows, out_dtype, False).squeeze(-1)
        if padded:
            logps = logps[:, :-1]  # [B, T']
        # where, not a product: a masked row's log-prob may be -inf and -inf * 0 is nan
        per_token = torch.where(keep, logps, torch.zeros((), dtype=logps.dtype, device=logps.device))
    keep_f = keep.to(per_token.dtype)
    return SequenceLogProbs(per_token=per_token, sum=per_token.sum(-1), mask=keep_f)
