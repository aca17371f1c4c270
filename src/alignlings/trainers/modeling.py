"""What the trainers ask of a transformers causal LM: a forward pass, completion log-probs, sampling.

Any ``AutoModelForCausalLM`` works. Two details matter for correctness:

* Positions follow the attention mask (``cumsum(mask) - 1``), as ``generate`` numbers them; a
  left-padded row scored with plain 0..T-1 positions would get different log-probs than the ones
  it was sampled with, and the GRPO ratio would not start at 1.
* Log-probs come from ``alignlings.logprobs.sequence_logprobs`` (the chosen token's logit minus a
  logsumexp, chunked, never a [B, T, V] log-softmax), at the sampling temperature.
"""

from __future__ import annotations

import inspect
from functools import lru_cache

import torch

from alignlings.logprobs import SequenceLogProbs, sequence_logprobs
from alignlings.trainers.distributed import unwrap


def disable_dropout(model: torch.nn.Module) -> None:
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0


@lru_cache(maxsize=32)
def _accepts(forward_cls: type, name: str) -> bool:
    return name in inspect.signature(forward_cls.forward).parameters


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions 0, 1, ... over the real tokens of each row, whichever side is padded."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def lm_logits(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
              logits_to_keep: int = 0) -> torch.Tensor:
    """[B, T, V] logits (or the last ``logits_to_keep`` positions) of a possibly DDP-wrapped causal LM."""
    cls = type(unwrap(model))
    kwargs = {"input_ids": input_ids, "attention_mask": attention_mask, "use_cache": False}
    if _accepts(cls, "position_ids"):
        kwargs["position_ids"] = position_ids(attention_mask)
    if logits_to_keep and _accepts(cls, "logits_to_keep"):
        kwargs["logits_to_keep"] = logits_to_keep
    logits = model(**kwargs).logits
    if logits_to_keep and logits.shape[1] != logits_to_keep:
        logits = logits[:, -logits_to_keep:]
    return logits


def completion_logprobs(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                        completion_mask: torch.Tensor, *, temperature: float = 1.0,
                        logits_to_keep: int = 0) -> tuple[SequenceLogProbs, torch.Tensor]:
    """Log-probs of the completion tokens under ``model`` and the logits they came from.

    With ``logits_to_keep = C + 1`` only the last C tokens (a right-aligned completion block, as in
    GRPO) are scored: per_token is [B, C]. Otherwise every token of ``input_ids`` after the first
    is scored and masked by ``completion_mask``: per_token is [B, T - 1].
    """
    logits = lm_logits(model, input_ids, attention_mask, logits_to_keep)  # [B, T or C+1, V]
    K = logits.shape[1]
    result = sequence_logprobs(
        logits, input_ids[:, -K:], mask=completion_mask[:, -K:], shift=True, temperature=temperature
    )
    return result, logits


@torch.no_grad()
def masked_entropy(logits: torch.Tensor, mask: torch.Tensor, temperature: float = 1.0) -> tuple[float, float]:
    """(sum, count) of the per-token entropy of softmax(logits / T) over masked positions.

    ``logits`` [B, K, V] predict the tokens of ``mask`` [B, K - 1] (the causal shift)."""
    z = logits[:, :-1].float() / temperature
    logp = torch.log_softmax(z, dim=-1)
    entropy = -(logp.exp() * logp).sum(-1)  # [B, K-1]
    m = mask.to(entropy.dtype)
    return (entropy * m).sum().item(), m.sum().item()


def generation_config(tokenizer, *, max_new_tokens: int, temperature: float, top_p: float, top_k: int,
                      pad_id: int):
    """A sampling ``GenerationConfig`` built once (``generate`` re-validates any kwargs every call)."""
    from transformers import GenerationConfig

    return GenerationConfig(
        do_sample=True,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k if top_k > 0 else None,
        pad_token_id=pad_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )


def sample(model: torch.nn.Module, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, config) -> torch.Tensor:
    """Completion ids [B, C] sampled with ``generate`` from left-padded prompts [B, P].

    Runs in eval mode (no dropout while sampling) under inference mode, then copies the ids out of
    inference mode so a later forward with gradient may use them."""
    model = unwrap(model)
    was_training = model.training
    model.eval()
    with torch.inference_mode():
        out = model.generate(input_ids=prompt_ids, attention_mask=prompt_mask, generation_config=config)
    model.train(was_training)
    return out[:, prompt_ids.shape[1]:].clone()
