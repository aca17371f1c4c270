"""GRPO's loss aggregation: four ways to turn per-token losses [B, T] into one number.

GRPO's per-token loss (clipped surrogate, maybe plus beta * KL) is the same in every variant; what
differs is how the tokens of completions of unequal length are averaged, and so how much each token
weighs in the gradient. DeepSeekMath (Shao et al., 2024) averages within each completion, then over
completions; Dr. GRPO (Liu et al., 2025) shows that this favours long wrong answers and divides by a
constant; DAPO (Yu et al., 2025) averages over all tokens of the batch. TRL 1.16 offers all four as
GRPOConfig.loss_type (grpo_trainer.py, _compute_loss); its default is "dapo".

Shapes: B completions, T the padded length; mask [B, T] is 1 on completion tokens, 0 on padding.
"""
import torch


def grpo_aggregate(per_token_loss, mask):
    """DeepSeekMath (loss_type="grpo"): mean over each completion's tokens, then over completions."""
    per_sequence = (per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)  # BLANK
    return per_sequence.mean()


def bnpo_aggregate(per_token_loss, mask):
    """BNPO (loss_type="bnpo"): one mean over all completion tokens of this (micro-)batch."""
    return (per_token_loss * mask).sum() / mask.sum().clamp(min=1.0)  # BLANK


def dr_grpo_aggregate(per_token_loss, mask, max_completion_length):
    """Dr. GRPO (loss_type="dr_grpo"): the token sum divided by a constant, B * max_completion_length."""
    return (per_token_loss * mask).sum() / (per_token_loss.shape[0] * max_completion_length)  # BLANK


def dapo_aggregate(per_token_loss, mask, num_items_in_batch):
    """DAPO (loss_type="dapo", TRL's default): the token sum divided by the number of completion tokens
    in the whole generation batch (all micro-batches), not just in this micro-batch."""
    return (per_token_loss * mask).sum() / max(num_items_in_batch, 1)  # BLANK


def aggregate(per_token_loss, mask, loss_type, max_completion_length=None, num_items_in_batch=None):
    """Dispatch on TRL's loss_type names."""
    if loss_type == "grpo":
        return grpo_aggregate(per_token_loss, mask)
    if loss_type == "bnpo":
        return bnpo_aggregate(per_token_loss, mask)
    if loss_type == "dr_grpo":
        return dr_grpo_aggregate(per_token_loss, mask, max_completion_length)
    if loss_type == "dapo":
        return dapo_aggregate(per_token_loss, mask, num_items_in_batch)
    raise ValueError(f"loss_type: expected grpo, bnpo, dr_grpo or dapo, got {loss_type!r}")


def token_weights(mask, loss_type, **kwargs):
    """[B, T] the weight each token's loss gets in the aggregate: d aggregate / d per_token_loss.

    Every aggregation is linear in the per-token losses, so it *is* a weighting of the tokens.
    """
    per_token_loss = torch.zeros(mask.shape, dtype=torch.float64, requires_grad=True)
    loss = aggregate(per_token_loss, mask.double(), loss_type, **kwargs)
    return torch.autograd.grad(loss, per_token_loss)[0]  # BLANK


def accumulate(per_token_loss, mask, micro_batches, loss_type, max_completion_length=None):
    """The loss of a batch split into micro_batches chunks, summed as gradient accumulation does.

    TRL divides the grpo, bnpo and dr_grpo losses by the number of accumulation steps; for dapo it
    passes num_items_in_batch, the token count of the whole batch, so nothing else is divided.
    """
    total = torch.zeros((), dtype=per_token_loss.dtype)
    for chunk_loss, chunk_mask in zip(per_token_loss.chunk(micro_batches), mask.chunk(micro_batches)):
        if loss_type == "dapo":
            total = total + dapo_aggregate(chunk_loss, chunk_mask, int(mask.sum()))  # BLANK
        else:
            total = total + aggregate(chunk_loss, chunk_mask, loss_type, max_completion_length) / micro_batches  # BLANK
    return total


if __name__ == "__main__":
    # one wrong answer of 2 tokens and one of 8, every token with the same loss 1.0 (A < 0)
    mask = torch.tensor([[1.0, 1, 0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1]])
    loss = torch.ones(2, 8)
    for name, kw in (("grpo", {}), ("bnpo", {}), ("dr_grpo", {"max_completion_length": 8}),
                     ("dapo", {"num_items_in_batch": 10})):
        w = token_weights(mask, name, **kw)
        print(f"{name:8s} loss = {aggregate(loss, mask, name, **kw).item():.4f}   weight per token: "
              f"short {w[0, 0].item():.4f}, long {w[1, 0].item():.4f}")
