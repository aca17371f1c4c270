"""Reading a reward model's score: the pooling step of a causal-LM `ForSequenceClassification` head.

The score head runs on every position and gives `logits` [batch, T, num_labels]; the reward of a
sequence is the head's output at its last real token. The model does not know the tokenizer's
padding side, and many chat models share one id for padding and end-of-turn (`pad_token_id ==
eos_token_id`, e.g. Llama-3 with `tokenizer.pad_token = tokenizer.eos_token`), so the last real
token must be found from `input_ids` alone, for left padding, right padding and no padding.
"""

import torch


def last_token_index(input_ids: torch.Tensor, pad_token_id: int | None) -> torch.Tensor:
    """The position [batch] whose score is the sequence's reward."""
    batch_size, seq_len = input_ids.shape
    if pad_token_id is None:
        if batch_size != 1:
            raise ValueError("pad_token_id: a padding id is needed to score batches of more than one sequence")
        return torch.full((batch_size,), seq_len - 1, dtype=torch.long)
    # the token just before the first padding token
    sequence_lengths = torch.eq(input_ids, pad_token_id).int().argmax(-1) - 1
    return sequence_lengths % seq_len


def pooled_reward(logits: torch.Tensor, input_ids: torch.Tensor, pad_token_id: int | None) -> torch.Tensor:
    """logits [batch, T, num_labels] of the score head -> rewards [batch, num_labels]."""
    if logits.dim() != 3 or logits.shape[:2] != input_ids.shape:
        raise ValueError(f"logits: expected [batch, T, num_labels] matching input_ids {tuple(input_ids.shape)}, "
                         f"got {tuple(logits.shape)}")
    index = last_token_index(input_ids, pad_token_id)
    return logits[torch.arange(input_ids.shape[0]), index]


if __name__ == "__main__":
    EOS = PAD = 2  # pad_token = eos_token
    # two answers to the same chat prompt; the template closes the user turn with EOS
    ids = torch.tensor([[5, 6, EOS, 7, 8, 9, EOS, PAD],
                        [5, 6, EOS, 3, 4, EOS, PAD, PAD]])
    logits = torch.arange(16, dtype=torch.float).reshape(2, 8, 1)
    print("index ", last_token_index(ids, PAD).tolist())
    print("reward", pooled_reward(logits, ids, PAD).squeeze(-1).tolist())
