"""The data collator of causal-LM fine-tuning (SFT): right-pad a list of tokenized examples and build
the labels.

Each example's `input_ids` already end with the EOS token (and a chat example closes every turn with
it), so that the model learns where an answer stops. Many models have no padding token and are
trained with `tokenizer.pad_token = tokenizer.eos_token`, so `pad_token_id` may equal the EOS id.
The labels are the input ids with -100 on padding, which the loss ignores.
"""

import torch

IGNORE_INDEX = -100


def collate(examples: list[list[int]], pad_token_id: int) -> dict[str, torch.Tensor]:
    """Token id lists -> {"input_ids", "attention_mask", "labels"}, each [b, T], right-padded."""
    if not examples or any(len(e) == 0 for e in examples):
        raise ValueError("examples: expected a non-empty list of non-empty token id lists")
    T = max(len(e) for e in examples)
    input_ids = torch.full((len(examples), T), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((len(examples), T), dtype=torch.long)
    for i, ids in enumerate(examples):
        input_ids[i, :len(ids)] = torch.tensor(ids)
        attention_mask[i, :len(ids)] = 1
    labels = input_ids.clone()
    labels[labels == pad_token_id] = IGNORE_INDEX  # no loss on padding
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


if __name__ == "__main__":
    EOS = PAD = 2  # pad_token = eos_token
    batch = collate([[5, 6, 7, EOS], [5, 8, EOS]], PAD)
    print(batch["labels"])
    print("EOS labels trained:", int((batch["labels"] == EOS).sum()))
