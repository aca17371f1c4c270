"""Supervised fine-tuning on completions only: labels, the shifted next-token NLL, and the
normalisation that makes gradient accumulation equal one big batch.

transformers' causal-LM loss (transformers/loss/loss_utils.py: ForCausalLMLoss, fixed_cross_entropy),
used by TRL 1.16's SFTTrainer (loss_type="nll", completion_only_loss); the accumulation fix is
transformers PR #34191 (2024).
"""
import torch
import torch.nn.functional as F


def completion_labels(input_ids, attention_mask, prompt_lengths, pad_token_id):
    # input_ids: [B, T] prompt + completion + EOS, right-padded; prompt_lengths: [B]
    positions = torch.arange(input_ids.shape[1]).unsqueeze(0)  # [1, T]
    is_prompt = positions < prompt_lengths.unsqueeze(1)  # BLANK
    # EOS stays a label (the model must learn to stop), even when pad_token_id == eos_token_id
    keep = ~is_prompt & (attention_mask == 1)  # BLANK
    return torch.where(keep, input_ids, -100)  # BLANK


def sft_loss(logits, labels, num_items_in_batch=None):
    # logits: [B, T, V] at every position of input_ids; labels: [B, T] from completion_labels
    V = logits.shape[-1]
    # position t predicts token t + 1
    shift_logits = logits[:, :-1, :]  # BLANK
    shift_labels = labels[:, 1:]  # BLANK
    nll_sum = F.cross_entropy(shift_logits.reshape(-1, V), shift_labels.reshape(-1), ignore_index=-100, reduction="sum")  # BLANK
    if num_items_in_batch is None:
        num_items_in_batch = (shift_labels != -100).sum()  # BLANK
    # with gradient accumulation: the label tokens of every micro-batch of the optimiser step
    return nll_sum / num_items_in_batch  # BLANK


if __name__ == "__main__":
    eos = pad = 2  # many tokenizers pad with EOS
    input_ids = torch.tensor([[5, 6, 7, 3, 2, 2], [4, 5, 3, 6, 7, 2]])
    attention_mask = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]])
    labels = completion_labels(input_ids, attention_mask, torch.tensor([2, 3]), pad)
    print(f"labels: {labels.tolist()}")
    torch.manual_seed(0)
    logits = torch.randn(2, 6, 8)
    print(f"SFT loss: {sft_loss(logits, labels).item():.6f}")

    # gradient accumulation: micro-batches of 1 and 9 label tokens; one big batch of 10
    big_logits = torch.randn(2, 8, 8, requires_grad=True)
    big_labels = torch.tensor([[-100] * 6 + [3, 2], [-100, 1, 4, 4, 5, 6, 7, 3]])
    n_items = int((big_labels[:, 1:] != -100).sum())
    micro = [(big_logits[:1], big_labels[:1]), (big_logits[1:], big_labels[1:])]
    big = sft_loss(big_logits, big_labels)
    accumulated = sum(sft_loss(lg, lb, num_items_in_batch=n_items) for lg, lb in micro)
    naive = sum(sft_loss(lg, lb) for lg, lb in micro) / len(micro)
    print(f"one batch: {big.item():.6f}   accumulated with num_items_in_batch: {accumulated.item():.6f}"
          f"   mean of micro-batch means: {naive.item():.6f}")
