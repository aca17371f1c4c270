"""Log-probabilities of the tokens a causal LM chose: the one-position shift, the completion mask,
sum and mean per sequence, and position ids for left-padded batches.

As TRL 1.16 (selective_log_softmax in trl/trainer/utils.py; DPO sums the completion log-probs) and
transformers' position ids from the attention mask (the code OpenRLHF PR #218 adopted after issue #217).
"""
import torch


def position_ids_from_mask(attention_mask):
    # attention_mask: [B, T], left padding: 0 before the prompt, 1 on real tokens
    # the first real token of every row gets position 0, whatever the padding in front of it
    position_ids = attention_mask.long().cumsum(-1) - 1  # BLANK
    return position_ids.masked_fill(attention_mask == 0, 1)  # padding: any valid position, it is masked


def token_logprobs(logits, input_ids, loss_mask):
    # logits: [B, T, V] at every position; input_ids: [B, T]; loss_mask: [B, T] 1.0 on completion tokens
    # position t predicts token t + 1: drop the last logits and the first token
    logps = torch.log_softmax(logits[:, :-1, :], dim=-1)  # BLANK
    targets = input_ids[:, 1:]  # BLANK
    per_token = logps.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # BLANK
    mask = loss_mask[:, 1:]  # BLANK
    per_token = per_token * mask  # [B, T-1], 0 outside the completion
    seq_sum = per_token.sum(-1)  # BLANK
    seq_mean = seq_sum / mask.sum(-1)  # BLANK
    return per_token, seq_sum, seq_mean


if __name__ == "__main__":
    input_ids = torch.tensor([[0, 0, 4, 2, 5, 1], [0, 3, 3, 2, 6, 1]])  # left-padded with 0
    attention_mask = torch.tensor([[0, 0, 1, 1, 1, 1], [0, 1, 1, 1, 1, 1]])
    loss_mask = torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]])
    torch.manual_seed(0)
    logits = torch.randn(2, 6, 8)
    print(f"position ids: {position_ids_from_mask(attention_mask).tolist()}")
    per_token, seq_sum, seq_mean = token_logprobs(logits, input_ids, loss_mask)
    print(f"per-token log-probs: {[[round(x, 4) for x in row] for row in per_token.tolist()]}")
    print(f"sum: {[round(x, 4) for x in seq_sum.tolist()]}   mean: {[round(x, 4) for x in seq_mean.tolist()]}")
