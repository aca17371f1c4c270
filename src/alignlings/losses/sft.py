"""Supervised fine-tuning: the next-token negative log-likelihood of a causal LM.

The loss transformers' causal LMs compute (``transformers.loss.loss_utils.ForCausalLMLoss``), which is
what TRL 1.16's ``SFTTrainer`` uses with ``loss_type="nll"``. Position t predicts token t + 1, so the
logits drop their last position and the labels their first. Labels equal to ``ignore_index`` (-100:
prompt tokens in completion-only training, padding) are left out of both the sum and the count.

Gradient accumulation: a mean per micro-batch, averaged over the micro-batches, weights a token of a
short micro-batch more than one of a long micro-batch, so it is not the loss of the big batch.
transformers fixed this in 2024 (PR #34191) by dividing each micro-batch's summed NLL by
``num_items_in_batch``, the count of label tokens in the whole accumulated batch; the sum of the
micro-batch losses is then exactly the big batch's mean.

Shapes: B sequences, T positions, V vocabulary.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from alignlings._validate import check_floating, check_ndim


def sft_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    *,
    ignore_index: int = -100,
    num_items_in_batch: int | torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean next-token NLL over the label tokens, with the one-position shift.

    Args:
        logits: [B, T, V] the model's logits for every position of ``input_ids``. float16/bfloat16
            logits are upcast to float32 first, as transformers does.
        labels: [B, T] integer token ids aligned with ``input_ids`` (not shifted); ``ignore_index``
            marks positions that are not trained on (the prompt, padding). Keep the EOS token as a
            label, or the model never learns to stop.
        ignore_index: the label value to skip (default -100, PyTorch's and transformers').
        num_items_in_batch: if given, the summed NLL is divided by this count (the label tokens of
            the whole accumulated batch, counted after the shift) instead of this batch's own count,
            as transformers' ``fixed_cross_entropy``; default None = a plain mean over this batch.

    Returns:
        A scalar loss. Like transformers, a batch with no label token gives NaN for the plain mean
        (0 / 0) and 0 with ``num_items_in_batch``.
    """
    check_ndim("logits", logits, 3, "[B, T, V] logits")
    check_floating("logits", logits)
    if not isinstance(labels, torch.Tensor) or torch.is_floating_point(labels) or labels.dtype == torch.bool:
        what = type(labels).__name__ if not isinstance(labels, torch.Tensor) else f"dtype {labels.dtype}"
        raise ValueError(f"labels: expected an integer tensor of token ids, got {what}")
    if labels.shape != logits.shape[:2]:
        raise ValueError(
            f"labels: expected shape {tuple(logits.shape[:2])} (the [B, T] of logits), got {tuple(labels.shape)}"
        )
    if num_items_in_batch is not None and float(num_items_in_batch) <= 0:
        raise ValueError(f"num_items_in_batch: expected a positive token count, got {num_items_in_batch!r}")
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()  # the log-softmax of half-precision logits loses too much

    V = logits.shape[-1]
    # position t predicts token t + 1: drop the last logit and the first label
    shift_logits = logits[:, :-1, :]  # [B, T-1, V]
    shift_labels = labels[:, 1:]  # [B, T-1]
    nll_sum = F.cross_entropy(
        shift_logits.reshape(-1, V), shift_labels.reshape(-1), ignore_index=ignore_index, reduction="sum"
    )
    if num_items_in_batch is None:
        num_tokens = (shift_labels != ignore_index).sum()
        return nll_sum / num_tokens
    if isinstance(num_items_in_batch, torch.Tensor):
        num_items_in_batch = num_items_in_batch.to(nll_sum.device)
    return nll_sum / num_items_in_batch


def count_label_tokens(labels: torch.Tensor, *, ignore_index: int = -100) -> int:
    """The label tokens the shifted loss counts in one batch (``labels[:, 1:] != ignore_index``); summed
    over the micro-batches of one optimiser step it is ``num_items_in_batch``."""
    check_ndim("labels", labels, 2, "[B, T] labels")
    return int((labels[:, 1:] != ignore_index).sum())
