"""verl's loss aggregation modes: how a [B, T] matrix of per-token losses becomes one scalar.

  "token-mean"          - every trained token weighs the same (DAPO),
  "seq-mean-token-mean" - mean over each sequence's tokens, then mean over sequences (GRPO paper),
  "seq-mean-token-sum"  - sum over each sequence's tokens, then mean over sequences (no length
                          normalisation: Dr. GRPO's motivation).
mask: [B, T], 1 for trained tokens.
"""

import torch


def agg_loss(loss_mat: torch.Tensor, mask: torch.Tensor, mode: str = "token-mean") -> torch.Tensor:
    if loss_mat.shape != mask.shape or loss_mat.dim() != 2:
        raise ValueError(f"loss_mat, mask: expected two [B, T] tensors, got {tuple(loss_mat.shape)} "
                         f"and {tuple(mask.shape)}")
    mask = mask.to(loss_mat.dtype)
    if mode == "token-mean":
        return (loss_mat * mask).sum() / mask.sum()
    if mode == "seq-mean-token-mean":
        return ((loss_mat * mask).sum(-1) / mask.sum(-1)).mean()
    if mode == "seq-mean-token-sum":
        # token-sum per sequence, then seq-mean
        return ((loss_mat * mask).sum(-1) / mask.sum(-1)).mean()
    raise ValueError(f"mode: expected 'token-mean', 'seq-mean-token-mean' or 'seq-mean-token-sum', got {mode!r}")


if __name__ == "__main__":
    loss = torch.ones(2, 4)
    mask = torch.tensor([[1, 0, 0, 0], [1, 1, 1, 1]])
    for mode in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum"):
        print(mode, agg_loss(loss, mask, mode).item())
