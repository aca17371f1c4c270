"""One optimizer step of causal-LM training split into gradient-accumulation micro-batches.

The loss of the whole step must be the mean cross-entropy over every trained token of every
micro-batch, so that `per_device_train_batch_size=1, gradient_accumulation_steps=32` trains like
`per_device_train_batch_size=32`. transformers' Trainer does this by counting the trained tokens of
the whole step first (`num_items_in_batch`) and summing each micro-batch's token losses divided by
that count (ForCausalLMLoss with reduction="sum").
"""

import torch
import torch.nn.functional as F

IGNORE_INDEX = -100


def causal_lm_loss(logits: torch.Tensor, labels: torch.Tensor, num_items_in_batch: int | None = None) -> torch.Tensor:
    """Next-token cross-entropy: logits [b, T, V] predict labels [b, T] shifted by one; -100 is ignored.
    Without num_items_in_batch, the mean over this micro-batch's trained tokens; with it, their sum
    divided by it."""
    logits = logits[:, :-1].reshape(-1, logits.shape[-1]).float()
    labels = labels[:, 1:].reshape(-1)
    reduction = "sum" if num_items_in_batch is not None else "mean"
    loss = F.cross_entropy(logits, labels, ignore_index=IGNORE_INDEX, reduction=reduction)
    if num_items_in_batch is not None:
        loss = loss / num_items_in_batch
    return loss


def accumulated_loss(micro_batches: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """The loss of one optimizer step over [(logits, labels), ...]: its value and gradient equal
    causal_lm_loss on all micro-batches concatenated."""
    num_items = sum(int((labels != IGNORE_INDEX).sum()) for _, labels in micro_batches)
    total = torch.zeros(())
    for logits, labels in micro_batches:
        # each micro-batch adds its summed token losses over the step's token count
        total = total + causal_lm_loss(logits, labels, num_items_in_batch=num_items)
    return total


if __name__ == "__main__":
    g = torch.Generator().manual_seed(0)
    short = (torch.randn(1, 4, 5, generator=g), torch.tensor([[1, 2, IGNORE_INDEX, IGNORE_INDEX]]))
    long = (torch.randn(1, 4, 5, generator=g), torch.tensor([[1, 2, 3, 4]]))
    print("accumulated", accumulated_loss([short, long]).item())
    print("one batch  ", causal_lm_loss(torch.cat([short[0], long[0]]), torch.cat([short[1], long[1]])).item())
