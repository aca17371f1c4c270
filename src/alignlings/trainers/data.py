"""Datasets, tokenization and collation in TRL's standard formats.

Rows are TRL's: preference rows ``{"prompt", "chosen", "rejected"}`` (DPO, reward model; an
optional ``margin`` column for the reward model) and prompt-only rows ``{"prompt", ...}`` (GRPO;
the other columns reach the reward functions as keyword arguments). Text is either plain strings
("standard") or lists of ``{"role", "content"}`` messages ("conversational"), which go through the
tokenizer's chat template.

Masks: the prompt never counts. A row is tokenized as prompt and prompt + completion; the completion
starts where the two token lists diverge (a tokenizer may merge across the boundary, so we cannot
just tokenize the completion alone; TRL does the same). Plain-text completions end with EOS; chat
rows end as the template renders them (TRL 1.16 appends EOS to plain text only). Training batches are
right-padded with a ``completion_mask`` aligned with ``input_ids``; prompts for generation are
left-padded so every row's next token is at the last position.

Shapes: B rows, T tokens (prompt + completion), P prompt tokens.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch


def load_rows(spec: Any) -> list[dict]:
    """The training rows as a list of dicts, from a ``datasets.Dataset``, a list of dicts, or a path.

    Paths: ``.jsonl`` / ``.json`` files are read with the json module (``datasets`` and pyarrow, about
    90 MB of memory, are only imported when needed); ``.csv``, ``.parquet`` and folders written by
    ``Dataset.save_to_disk`` go through ``datasets``. Hub names are left out on purpose: training here
    runs offline.
    """
    if isinstance(spec, list):
        return spec
    if hasattr(spec, "to_list"):  # a datasets.Dataset
        return spec.to_list()
    path = Path(spec)
    if path.suffix in (".jsonl", ".json") and path.is_file():
        text = path.read_text()
        if path.suffix == ".json" and text.lstrip().startswith("["):
            return json.loads(text)
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    import datasets

    if path.is_dir():
        loaded = datasets.load_from_disk(str(path))
        return (loaded["train"] if isinstance(loaded, datasets.DatasetDict) else loaded).to_list()
    kinds = {".csv": "csv", ".parquet": "parquet"}
    if path.suffix not in kinds:
        raise ValueError(f"dataset: expected a .jsonl/.json/.csv/.parquet file or a saved dataset folder, got {spec!r}")
    return datasets.load_dataset(kinds[path.suffix], data_files=str(path), split="train").to_list()


def check_columns(rows: list[dict], required: Sequence[str], trainer: str) -> None:
    if not rows:
        raise ValueError(f"train_dataset: {trainer} got no rows")
    missing = [c for c in required if c not in rows[0]]
    if missing:
        raise ValueError(
            f"train_dataset: {trainer} expects columns {list(required)}, missing {missing}; got {sorted(rows[0])}"
        )


def pad_token_id(tokenizer) -> int:
    """The pad id, falling back to EOS (GPT-2 has no pad token); masks make the choice harmless."""
    pid = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pid is None:
        raise ValueError("processing_class: the tokenizer has neither pad_token_id nor eos_token_id")
    return pid


def _is_conversational(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and isinstance(value[0], dict) and "role" in value[0]


def prompt_text(tokenizer, prompt: Any) -> str:
    """The prompt as text: itself, or rendered with the chat template and the generation prompt."""
    if _is_conversational(prompt):
        return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    return prompt


def tokenize_prompt(tokenizer, prompt: Any) -> list[int]:
    if _is_conversational(prompt):
        return tokenizer(prompt_text(tokenizer, prompt), add_special_tokens=False)["input_ids"]
    return tokenizer(prompt)["input_ids"]


def _common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _tokenize_full(tokenizer, prompt: Any, completion: Any) -> list[int]:
    """prompt + completion as TRL 1.16 tokenizes it: plain text gets the EOS *text* appended when it
    does not already end with it (``add_eos`` in ``dpo_trainer.py``/``reward_trainer.py``); a
    conversation is rendered by the chat template and gets nothing appended (a ChatML turn ends in
    ``<|im_end|>\n``, and the template decides what closes it)."""
    if _is_conversational(prompt):
        text = tokenizer.apply_chat_template(prompt + completion, tokenize=False)
        return tokenizer(text, add_special_tokens=False)["input_ids"]
    eos = tokenizer.eos_token
    if eos is not None and not completion.endswith(eos):
        completion = completion + eos
    return tokenizer(prompt + completion)["input_ids"]


def tokenize_preference(tokenizer, prompt: Any, chosen: Any, rejected: Any) -> tuple[list[int], list[int], list[int]]:
    """(prompt ids, chosen ids, rejected ids) of one preference row, as TRL 1.16's DPO tokenizes it.

    prompt + chosen and prompt + rejected are each tokenized whole, so every training row is exactly
    the tokenization of its own text, whatever a BPE merge does at the boundary. The shared prompt is
    the part both agree with the prompt tokenized alone: ``min`` of the two common-prefix lengths
    (``tokenize_fn`` in TRL's ``dpo_trainer.py``). A completion whose first token merged with the end
    of the prompt therefore starts one token early, and the other completion starts at the same place.
    """
    prompt_ids = tokenize_prompt(tokenizer, prompt)
    full_c = _tokenize_full(tokenizer, prompt, chosen)
    full_r = _tokenize_full(tokenizer, prompt, rejected)
    n = min(_common_prefix_length(prompt_ids, full_c), _common_prefix_length(prompt_ids, full_r))
    return list(full_c[:n]), list(full_c[n:]), list(full_r[n:])


def tokenize_pair(tokenizer, prompt: Any, completion: Any) -> tuple[list[int], list[int]]:
    """(prompt ids, completion ids) for one prompt/completion pair: prompt + completion tokenized whole
    (plain text ends in EOS, a conversation as its chat template renders it, see ``_tokenize_full``),
    split where it diverges from the prompt tokenized alone."""
    prompt_ids = tokenize_prompt(tokenizer, prompt)
    full_ids = _tokenize_full(tokenizer, prompt, completion)
    n = _common_prefix_length(prompt_ids, full_ids)
    return list(full_ids[:n]), list(full_ids[n:])


def truncate(prompt_ids: list[int], completion_ids: list[int], max_length: int | None,
             mode: str = "keep_start") -> tuple[list[int], list[int]]:
    """Cut prompt + completion to ``max_length`` tokens: drop the end ("keep_start") or the start ("keep_end")."""
    if max_length is None or len(prompt_ids) + len(completion_ids) <= max_length:
        return prompt_ids, completion_ids
    if mode == "keep_start":
        prompt_ids = prompt_ids[:max_length]
        return prompt_ids, completion_ids[: max_length - len(prompt_ids)]
    completion_ids = completion_ids[-max_length:]
    keep_prompt = max_length - len(completion_ids)
    return (prompt_ids[-keep_prompt:] if keep_prompt else []), completion_ids


def _ragged(lengths: Sequence[int], side: str = "right") -> tuple[torch.Tensor, torch.Tensor]:
    """(mask [B, T_max] bool, positions [T_max]) for rows of ``lengths`` packed to ``side``."""
    T = max(lengths, default=0)
    positions = torch.arange(T)
    n = torch.tensor(list(lengths), dtype=torch.long)[:, None]
    return (positions < n) if side == "right" else (positions >= T - n), positions


def pad(seqs: Sequence[Sequence[int]], value: int, side: str = "right") -> torch.Tensor:
    """[B, T_max] long tensor of the sequences padded with ``value`` on ``side``.

    One tensor of all the tokens scattered into the padded block (row-major, as the mask's True
    entries are visited): a few tensor operations per batch, not a copy per row."""
    mask, _ = _ragged([len(s) for s in seqs], side)
    flat = [int(t) for s in seqs for t in s]
    out = torch.full(mask.shape, value, dtype=torch.long)
    return out.masked_scatter_(mask, torch.tensor(flat, dtype=torch.long)) if flat else out


def collate_completions(prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]],
                        pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded prompt + completion rows: ``input_ids``, ``attention_mask`` and
    ``completion_mask`` (1 on completion tokens only), each [B, T]."""
    seqs = [torch.tensor(list(p) + list(c), dtype=torch.long) for p, c in zip(prompts, completions)]
    return collate_sequences(seqs, [len(p) for p in prompts], pad_id)


def collate_sequences(seqs: Sequence[torch.Tensor], starts: Sequence[int], pad_id: int) -> dict[str, torch.Tensor]:
    """``collate_completions`` from rows tokenized once into 1-D long tensors (prompt + completion) and
    the index where each completion starts: the rows concatenated and scattered into the padded
    block, and two comparisons with the positions, build the three [B, T] tensors (no Python loop
    over rows or tokens: a batch collates in about ten tensor operations)."""
    real, positions = _ragged([len(s) for s in seqs])
    input_ids = torch.full(real.shape, pad_id, dtype=torch.long)
    if len(seqs):
        input_ids.masked_scatter_(real, torch.cat(list(seqs)))
    attention_mask = real.long()
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "completion_mask": attention_mask * (positions >= torch.tensor(list(starts), dtype=torch.long)[:, None]),
    }


def collate_aligned(seqs: Sequence[torch.Tensor], starts: Sequence[int], pad_id: int) -> dict[str, torch.Tensor]:
    """``collate_sequences``'s three [B, P + C] tensors with the prompts left-padded to a common width P
    and the completions right-padded after them, so every completion starts at column P (GRPO's
    layout). Rows that share a prompt then share the whole column block [:, :P], which the lean
    scoring pass computes once (``decode.shared_prefix_logits``). Positions follow the attention
    mask, so each row's values are those of its right-padded layout."""
    B = len(seqs)
    P = max(starts) if B else 0
    C = max((len(s) - st for s, st in zip(seqs, starts)), default=0)
    input_ids = torch.full((B, P + C), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((B, P + C), dtype=torch.long)
    for i, (s, st) in enumerate(zip(seqs, starts)):
        input_ids[i, P - st: P + len(s) - st] = s
        attention_mask[i, P - st: P + len(s) - st] = 1
    completion_mask = attention_mask.clone()
    completion_mask[:, :P] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask, "completion_mask": completion_mask}


def left_pad_prompts(prompts: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded prompt ids and attention mask [B, P] for ``generate``."""
    return pad(prompts, pad_id, "left"), pad([[1] * len(p) for p in prompts], 0, "left")


def completion_mask_until_eos(completion_ids: torch.Tensor, eos_id: int | Sequence[int] | None,
                              pad_id: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask [B, C] over generated tokens up to and including the first EOS (any of ``eos_id`` when it
    is a list), and a [B] bool "truncated" flag. Tokens after EOS are padding.

    "Truncated" is TRL 1.16's rule (``GRPOTrainer``: ``ids[-1] not in eos_and_pad``): the last token
    kept is neither an EOS nor ``pad_id``. So a row without EOS whose last drawn token is the pad id
    (an ordinary token of the vocabulary when the pad is not the EOS) is not truncated, as in TRL."""
    B, C = completion_ids.shape
    eos_ids = [] if eos_id is None else [eos_id] if isinstance(eos_id, int) else list(eos_id)
    device = completion_ids.device
    if not eos_ids:
        mask = torch.ones(B, C, dtype=torch.long, device=device)
        truncated = torch.ones(B, dtype=torch.bool, device=device) if pad_id is None or not C else \
            completion_ids[:, -1] != pad_id
        return mask, truncated
    is_eos = torch.isin(completion_ids, torch.tensor(eos_ids, device=device))  # [B, C]
    has_eos = is_eos.any(dim=1)
    first_eos = torch.where(has_eos, is_eos.int().argmax(dim=1), torch.full((B,), C, device=device))
    positions = torch.arange(C, device=device).expand(B, C)
    mask = (positions <= first_eos.unsqueeze(1)).long()
    truncated = ~has_eos
    if pad_id is not None and C:  # a row without EOS keeps all C tokens: its last one is the last column
        truncated = truncated & (completion_ids[:, -1] != pad_id)
    return mask, truncated
