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
from contextlib import contextmanager
from functools import lru_cache
from typing import NamedTuple

import torch

from alignlings.logprobs import _SMALL_ELEMENTS, SequenceLogProbs, sequence_logprobs
from alignlings.trainers.checkpoint import set_seed
from alignlings.trainers.decode import lean_decoder, lean_logits
from alignlings.trainers.distributed import unwrap


def disable_dropout(model: torch.nn.Module) -> None:
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0


def prepare_model(model: torch.nn.Module, args, peft_config=None) -> torch.nn.Module:
    """Apply what the config and ``peft_config`` ask of a transformers model before training.

    ``peft_config`` (a ``peft.PeftConfig``, e.g. ``LoraConfig``; TRL's trainer argument of the same
    name): the model becomes ``peft.get_peft_model(model, peft_config)`` and only the adapters train;
    the RNG is seeded with ``args.seed`` just before, as TRL does, so the adapters' initial weights
    follow the seed. Prompt-learning configs (prompt tuning, prefix tuning, P-tuning) are refused.
    ``args.gradient_checkpointing``: ``gradient_checkpointing_enable`` with TRL's
    ``use_reentrant=False`` default (with PEFT, also ``enable_input_require_grads``, as TRL does).
    """
    if peft_config is not None:
        try:
            import peft
        except ImportError as exc:
            raise ValueError(
                "peft_config: the peft library is not installed (pip install 'alignlings[peft]')") from exc
        if not isinstance(peft_config, peft.PeftConfig):
            raise ValueError(f"peft_config: expected a peft.PeftConfig such as peft.LoraConfig, got "
                             f"{type(peft_config).__name__}")
        if isinstance(model, peft.PeftModel):
            raise ValueError("peft_config: the model already has adapters (a PeftModel); pass its base model, "
                             "or the PeftModel without peft_config")
        _refuse_prompt_learning(peft_config, "peft_config")
        # peft draws the adapters' initial weights from the global RNG: seed first, as TRL does, so
        # that the same --seed gives the same adapters (and the same run)
        set_seed(args.seed)
        model = peft.get_peft_model(model, peft_config)
    else:
        for config in (getattr(model, "peft_config", None) or {}).values() if is_peft_model(model) else ():
            _refuse_prompt_learning(config, "model")
    if getattr(args, "gradient_checkpointing", False):
        kwargs = dict(args.gradient_checkpointing_kwargs or {})
        kwargs.setdefault("use_reentrant", False)
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5 names it so
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        elif hasattr(model, "gradient_checkpointing_enable"):
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        else:
            raise ValueError(f"gradient_checkpointing: {type(model).__name__} has no gradient_checkpointing_enable "
                             "(a transformers PreTrainedModel is needed)")
        if is_peft_model(model):
            model.enable_input_require_grads()
    return model


@torch.no_grad()
def is_causal(model: torch.nn.Module, length: int = 6) -> bool:
    """True when ``model``'s logits at each position ignore every later token: the property every
    trainer relies on (a completion's log-probs are read off one pass over prompt + completion).

    Checked directly: one short sequence, then the same with its last token changed; the logits
    before that token must not move. An encoder loaded through ``AutoModelForCausalLM`` (BERT's
    ``BertLMHeadModel`` with ``is_decoder=False``) attends both ways and fails this."""
    inner = unwrap(model)
    vocab = inner.get_output_embeddings().weight.shape[0] if inner.get_output_embeddings() is not None else None
    vocab = vocab or getattr(inner.config, "vocab_size", 2)
    device = next(inner.parameters()).device
    ids = (torch.arange(length, device=device) * 7 + 3) % vocab
    changed = ids.clone()
    changed[-1] = (changed[-1] + 1) % vocab
    was_training = inner.training
    inner.eval()
    try:
        a, b = (inner(input_ids=x[None], attention_mask=torch.ones_like(x)[None]).logits[0, :-1].float()
                for x in (ids, changed))
    finally:
        inner.train(was_training)
    return bool(torch.allclose(a, b, atol=1e-4, rtol=1e-4))


def _refuse_prompt_learning(config, name: str) -> None:
    """Prompt tuning, prefix tuning and P-tuning add virtual tokens (prepended embeddings or past keys)
    that the trainers' scoring does not see: positions follow the attention mask, the lean decoder
    and the KV-cache sampler run the base model's layers only. Refused up front."""
    if getattr(config, "is_prompt_learning", False):
        raise ValueError(
            f"{name}: {type(config).__name__} is a prompt-learning method (prompt tuning, prefix tuning, "
            "P-tuning), which the trainers do not support: its virtual tokens are not scored consistently. "
            "Use an adapter method such as peft.LoraConfig")


def is_peft_model(model: torch.nn.Module) -> bool:
    return type(unwrap(model)).__name__.startswith("Peft") and hasattr(unwrap(model), "disable_adapter")


@lru_cache(maxsize=32)
def _accepts(forward_cls: type, name: str) -> bool:
    return name in inspect.signature(forward_cls.forward).parameters


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions 0, 1, ... over the real tokens of each row, whichever side is padded."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def lm_logits(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
              logits_to_keep: int = 0, lean: bool = False, select: torch.Tensor | None = None,
              positions: ScoredPositions | None = None) -> torch.Tensor:
    """[B, T, V] logits (or the last ``logits_to_keep`` positions) of a possibly DDP-wrapped causal LM.

    ``lean``: one pass through ``decode.LeanDecoder`` where the model has one (``decode.LEAN_MODELS``,
    no active dropout, no activation checkpointing, no hook it would skip); with gradient only when
    the model is not DDP-wrapped (DDP arms its gradient averaging in its own ``forward``). Otherwise,
    and by default, the model's ``forward``. Same logits and gradients up to float rounding.

    ``select`` (boolean [B, T]): only the logits of those positions, [N, V]; the lean pass puts only
    them through the final norm and the LM head, ``forward`` computes all and picks them.

    ``positions``: the batch's ``scored_positions``, when the caller worked them out already (its
    position ids and padding side are then not derived again)."""
    inner = unwrap(model)
    if lean and (inner is model or not torch.is_grad_enabled()):
        logits = lean_logits(inner, input_ids, attention_mask, logits_to_keep, select,
                             position_ids=None if positions is None else positions.position_ids,
                             right_padded=None if positions is None else positions.right_padded,
                             select_index=None if positions is None else positions.index)
        if logits is not None:
            return logits
    # a PeftModel's forward takes **kwargs and passes them on: read the wrapped model's signature
    cls = type(inner.get_base_model()) if hasattr(inner, "get_base_model") else type(inner)
    kwargs = {"input_ids": input_ids, "attention_mask": attention_mask, "use_cache": False}
    if _accepts(cls, "position_ids"):
        kwargs["position_ids"] = position_ids(attention_mask) if positions is None else positions.position_ids
    if logits_to_keep and _accepts(cls, "logits_to_keep"):
        kwargs["logits_to_keep"] = logits_to_keep
    logits = model(**kwargs).logits
    if select is not None:
        return logits[select]
    if logits_to_keep and logits.shape[1] != logits_to_keep:
        logits = logits[:, -logits_to_keep:]
    return logits


def completion_logprobs(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                        completion_mask: torch.Tensor, *, temperature: float = 1.0,
                        logits_to_keep: int = 0, lean: bool = False) -> tuple[SequenceLogProbs, torch.Tensor]:
    """Log-probs of the completion tokens under ``model`` and the logits they came from.

    With ``logits_to_keep = C + 1`` only the last C tokens (a right-aligned completion block, as in
    GRPO) are scored: per_token is [B, C]. Otherwise every token of ``input_ids`` after the first
    is scored and masked by ``completion_mask``: per_token is [B, T - 1]. ``lean``: see ``lm_logits``.
    """
    logits = lm_logits(model, input_ids, attention_mask, logits_to_keep, lean)  # [B, T or C+1, V]
    K = logits.shape[1]
    # The causal shift done here, not by ``shift=True``: position t scores token t + 1, and the last
    # position scores nothing (mask 0). Then labels and logits have the same K positions, so the
    # log-softmax runs over the [B*K, V] logits as one block instead of row by row (a loop of B
    # small kernels in forward and in backward: about 1 ms of a 10 ms DPO step on the benchmark's
    # model). Same values, gradients and sums as ``shift=True``.
    labels = input_ids[:, -K:].roll(-1, dims=1)
    mask = torch.cat([completion_mask[:, -K + 1:], torch.zeros_like(completion_mask[:, :1])], dim=1)
    full = sequence_logprobs(logits, labels, mask=mask, temperature=temperature)  # [B, K], last is 0
    per_token = full.per_token[:, :-1]
    result = SequenceLogProbs(per_token=per_token, sum=per_token.sum(-1), mask=full.mask[:, :-1])
    return result, logits


class ScoredPositions(NamedTuple):
    """Where a batch's completion tokens are scored, worked out once per batch: DPO's policy pass and
    its reference pass share it (``scored_positions``)."""

    scored: torch.Tensor  # [B, T-1] bool: position t predicts completion token t + 1
    select: torch.Tensor  # [B, T] bool: the same over all T positions (the last predicts nothing)
    index: torch.Tensor  # [N] the selected positions as indices into the B * T flattened ones, row-major
    rows: torch.Tensor  # [N] the row of each
    lengths: torch.Tensor  # [B] scored tokens per row
    labels: torch.Tensor  # [N] the scored tokens, row-major
    position_ids: torch.Tensor  # [B, T] 0, 1, ... over each row's real tokens
    right_padded: bool | None  # every row's padding after its real tokens (None: not known)


def scored_positions(input_ids: torch.Tensor, attention_mask: torch.Tensor, completion_mask: torch.Tensor,
                     right_padded: bool | None = None) -> ScoredPositions:
    """The ``ScoredPositions`` of a [B, T] batch; ``right_padded`` as the collator knows it (None: let
    the scoring pass check the mask)."""
    scored = completion_mask[:, 1:].bool()  # [B, T-1]
    select = torch.cat([scored, torch.zeros_like(scored[:, :1])], dim=1)  # [B, T]
    index = select.reshape(-1).nonzero().squeeze(1)  # [N]
    return ScoredPositions(scored=scored, select=select, index=index, rows=index // select.shape[1],
                           lengths=scored.sum(-1), labels=input_ids.reshape(-1)[index + 1],
                           position_ids=position_ids(attention_mask), right_padded=right_padded)


def completion_token_logprobs(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                              completion_mask: torch.Tensor, *, temperature: float = 1.0,
                              lean: bool = False, positions: ScoredPositions | None = None,
                              ) -> tuple[SequenceLogProbs, torch.Tensor]:
    """``completion_logprobs`` scoring only the completion: the same per-token log-probs [B, T - 1]
    (0 where the mask is 0), and the logits of the N scored positions only, [N, V], row-major.

    Only positions that predict a completion token go through the final norm, the LM head and the
    log-softmax (on the lean path; ``forward`` computes every position's logits and picks them). In
    DPO rows of 96 prompt and 32 completion tokens that is a quarter of the positions, and with a
    vocabulary of 50k the LM head is a third of the model's FLOPs (TRL 1.16's fused LM head skips the
    same positions). ``positions``: the batch's ``scored_positions`` when already worked out."""
    if positions is None:
        positions = scored_positions(input_ids, attention_mask, completion_mask)
    logps, logits = _scored_logps(model, input_ids, attention_mask, positions, temperature, lean)
    scored = positions.scored
    per_token = torch.zeros(scored.shape, dtype=logps.dtype, device=logps.device).masked_scatter(scored, logps)
    mask = scored.to(completion_mask.dtype)
    return SequenceLogProbs(per_token=per_token, sum=per_token.sum(-1), mask=mask), logits


def completion_sums(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    positions: ScoredPositions, *, temperature: float = 1.0,
                    lean: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(summed completion log-probs [B], the logits of the N scored positions [N, V]): what DPO reads
    of ``completion_token_logprobs``, without the per-token [B, T - 1] block (each row's sum is
    accumulated from its scored positions directly; the same sum up to float rounding)."""
    logps, logits = _scored_logps(model, input_ids, attention_mask, positions, temperature, lean)
    sums = torch.zeros(input_ids.shape[0], dtype=logps.dtype, device=logps.device).index_add(0, positions.rows, logps)
    return sums, logits


def _scored_logps(model, input_ids, attention_mask, positions: ScoredPositions, temperature: float,
                  lean: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """log p of each scored token [N] and the logits [N, V] they came from."""
    logits = lm_logits(model, input_ids, attention_mask, lean=lean, select=positions.select,
                       positions=positions)  # [N, V]
    labels = positions.labels
    if temperature == 1.0 and logits.dtype in (torch.float32, torch.float64) and logits.numel() <= _SMALL_ELEMENTS:
        # ``sequence_logprobs``' small-logits branch without its input checks and masking, which do
        # nothing here (every one of the N positions is kept; the ids already went through the
        # embedding): the same log_softmax and gather, so the same values and gradients
        logps = torch.log_softmax(logits, dim=-1).gather(-1, labels[:, None]).squeeze(-1)  # [N]
    else:
        logps = sequence_logprobs(logits[None], labels[None], temperature=temperature).per_token[0]  # [N]
    return logps, logits


def sampler_logprobs(model: torch.nn.Module, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                     next_ids: torch.Tensor, *, lean: bool, scoring: bool = True) -> torch.Tensor:
    """[B, 2, V] log-softmax of what the sampler computes for left-padded prompts [B, P]: the
    prefill's last logits and one token step's (feeding ``next_ids`` [B, 1]), through the lean
    decoder (``lean``; ``scoring``: the default sampler's fused GELU) or the model's ``forward``
    with its cache. For the ``lean_check_steps`` check of the sampling path."""
    model = unwrap(model)
    B, P = prompt_ids.shape
    mask = torch.ones(B, P + 1, dtype=torch.long, device=prompt_ids.device)
    mask[:, :P] = prompt_mask
    positions = position_ids(mask[:, :P])
    decoder = lean_decoder(model, mask, scoring=scoring) if lean else None
    if decoder is not None:
        first = decoder.prefill(prompt_ids, positions)[:, -1]
        second = decoder.forward(next_ids, positions[:, -1:] + 1)[:, -1]
    else:
        first, past = _cache_forward(model, prompt_ids, mask[:, :P], positions, None)
        second, _ = _cache_forward(model, next_ids, mask, positions[:, -1:] + 1, past)
    return torch.stack([first, second], dim=1).float().log_softmax(-1)


def check_lean_path(model: torch.nn.Module, score, *, step: int, tolerance: float) -> float | None:
    """The opt-in drift check (``lean_check_steps``): ``score(lean)`` -> completion log-probs of one
    batch, run once through the lean decoder and once through the model's ``forward``, without
    gradient; a ``RuntimeError`` naming the step, the difference and the way out when they differ by
    more than ``tolerance``. Returns the difference, or None where ``model`` takes no lean path
    (then both would be ``forward``; with an active dropout they would differ by chance)."""
    from alignlings.trainers.decode import lean_decoder

    inner = unwrap(model)
    probe = torch.ones(1, 2, dtype=torch.long, device=next(inner.parameters()).device)
    if lean_decoder(inner, probe, cache=False) is None:
        return None
    with torch.no_grad():
        lean, stock = score(True).float(), score(False).float()
    diff = float((lean - stock).abs().max()) if lean.numel() else 0.0
    if not diff <= tolerance:  # NaN fails too
        import transformers

        raise RuntimeError(
            f"lean_check_steps: at step {step} the lean decoder's log-probs differ from the model's own "
            f"forward by {diff:.3g} (lean_check_tolerance = {tolerance:g}; {type(inner).__name__}, transformers "
            f"{transformers.__version__}). The lean decoder does not reproduce this model here: train with "
            "model_forward = true (--model-forward), and please report the model and versions.")
    return diff


@torch.no_grad()
def masked_entropy(logits: torch.Tensor, mask: torch.Tensor, temperature: float = 1.0) -> tuple[float, float]:
    """(sum, count) of the per-token entropy of softmax(logits / T) over masked positions.

    ``logits`` [B, K, V] predict the tokens of ``mask`` [B, K - 1] (the causal shift)."""
    z = logits[:, :-1].float() / temperature
    logp = torch.log_softmax(z, dim=-1)
    entropy = -(logp.exp() * logp).sum(-1)  # [B, K-1]
    m = mask.to(entropy.dtype)
    total, count = torch.stack([(entropy * m).sum(), m.sum()]).tolist()  # one read-back
    return total, count


def eos_token_ids(tokenizer, model: torch.nn.Module | None = None) -> list[int]:
    """The ids that end a completion: the tokenizer's EOS, then any others the model's generation
    config declares (Llama 3's ``<|eot_id|>``, Qwen's ``<|im_end|>``), as TRL 1.16's GRPOTrainer."""
    ids = [] if tokenizer.eos_token_id is None else [tokenizer.eos_token_id]
    declared = getattr(getattr(unwrap(model), "generation_config", None), "eos_token_id", None) if model is not None else None
    for i in [declared] if isinstance(declared, int) else list(declared or []):
        if i not in ids:
            ids.append(int(i))
    return ids


def generation_config(tokenizer, *, max_new_tokens: int, temperature: float, top_p: float, top_k: int,
                      pad_id: int, eos_ids: list[int] | None = None, min_p: float | None = None,
                      repetition_penalty: float = 1.0):
    """A sampling ``GenerationConfig`` built once (``generate`` re-validates any kwargs every call).

    ``top_k`` goes in as given, 0 included, as TRL passes it: 0 turns top-k filtering off, while
    None would let ``generate`` fill in transformers' default of 50."""
    from transformers import GenerationConfig

    return GenerationConfig(
        do_sample=True,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        min_p=min_p,
        repetition_penalty=repetition_penalty,
        pad_token_id=pad_id,
        eos_token_id=eos_ids if eos_ids is not None else tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )


@contextmanager
def checkpointing_suspended(model: torch.nn.Module):
    """Activation checkpointing off for the block, back on after it: TRL 1.16 samples so
    (``unwrap_model_for_generation`` calls ``gradient_checkpointing_disable`` around ``generate``),
    and a checkpointed layer in training mode would refuse the KV cache. The modules' own
    ``gradient_checkpointing`` flags are flipped and restored (no checkpointing settings lost)."""
    flagged = [m for m in model.modules() if m.__dict__.get("gradient_checkpointing") is True]
    for m in flagged:
        m.gradient_checkpointing = False
    try:
        yield
    finally:
        for m in flagged:
            m.gradient_checkpointing = True


def sample(model: torch.nn.Module, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, config) -> torch.Tensor:
    """Completion ids [B, C] sampled with ``generate`` from left-padded prompts [B, P].

    Runs in the model's own mode, as TRL 1.16's GRPO does (its model is in training mode, so an
    active dropout acts while sampling; ``disable_dropout=True`` turns it off), with activation
    checkpointing suspended, under inference mode; the ids are copied out of inference mode so a
    later forward with gradient may use them."""
    model = unwrap(model)
    with torch.inference_mode(), checkpointing_suspended(model):
        out = model.generate(input_ids=prompt_ids, attention_mask=prompt_mask, generation_config=config)
    return out[:, prompt_ids.shape[1]:].clone()


def filter_logits(logits: torch.Tensor, temperature: float, top_k: int, top_p: float,
                  min_p: float | None = None) -> torch.Tensor:
    """[B, V] float32 scores to sample from: transformers' sampling warpers in ``generate``'s order and
    arithmetic (``TemperatureLogitsWarper``, ``TopKLogitsWarper``, ``TopPLogitsWarper``,
    ``MinPLogitsWarper``), each applied only when it is active, so a seeded draw picks the same token
    ``generate`` would."""
    if temperature != 1.0:
        logits = logits / temperature
    if top_k:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]))[0][..., -1, None]
        logits = logits.masked_fill(logits < kth, -float("inf"))
    if top_p < 1.0:
        sorted_logits, sorted_idx = torch.sort(logits, descending=False)
        remove = sorted_logits.softmax(dim=-1).cumsum(dim=-1) <= (1 - top_p)
        remove[..., -1:] = False
        logits = logits.masked_fill(remove.scatter(1, sorted_idx, remove), -float("inf"))
    if min_p is not None:  # tokens under min_p times the top token's probability, after temperature
        probs = torch.softmax(logits, dim=-1)
        remove = probs < min_p * probs.amax(dim=-1, keepdim=True)
        remove.scatter_(-1, torch.topk(probs, 1, dim=-1).indices, False)  # the top token always stays
        logits = logits.masked_fill(remove, -float("inf"))
    return logits


def penalize_repeats(logits: torch.Tensor, seen: torch.Tensor, penalty: float) -> torch.Tensor:
    """transformers' ``RepetitionPenaltyLogitsProcessor`` (CTRL, Keskar et al., 2019) on [B, V] float32
    logits: a token already in the row (``seen`` [B, V], the prompt's real tokens and those drawn so
    far: transformers 5 skips the left padding) gets its logit divided by ``penalty`` when positive,
    multiplied when negative. The same arithmetic, so the same draws as ``generate``."""
    return torch.where(seen, torch.where(logits < 0, logits * penalty, logits / penalty), logits)


def _cache_forward(model, input_ids, attention_mask, positions, past):
    # a PeftModel forwards its keyword arguments to the model it wraps: read that one's signature
    cls = type(model.get_base_model()) if hasattr(model, "get_base_model") else type(model)
    kwargs = {"input_ids": input_ids, "attention_mask": attention_mask, "use_cache": True}
    if past is not None:  # transformers 5 names the cache argument ``cache``, 4.x ``past_key_values``
        kwargs["cache" if _accepts(cls, "cache") else "past_key_values"] = past
    if _accepts(cls, "position_ids"):
        kwargs["position_ids"] = positions
    if _accepts(cls, "logits_to_keep"):
        kwargs["logits_to_keep"] = 1
    out = model(**kwargs)
    cache = getattr(out, "cache", None)
    return out.logits[:, -1].float(), cache if cache is not None else out.past_key_values


#: How ``sample_with_cache`` draws each token (``draw``); see ``draw_tokens``.
DRAWS = ("cdf", "multinomial")


def draw_tokens(probs: torch.Tensor, draw: str = "cdf") -> torch.Tensor:
    """One token per row [B] from the probabilities ``probs`` [B, V] (rows need not sum to 1).

    ``"multinomial"``: ``torch.multinomial(probs, 1)``, what ``generate`` calls, so a seeded draw gives
    ``generate``'s very token. On the CPU it draws one exponential per vocabulary entry (argmax of
    p / Exp(1)): 1 ms for 8 rows of 8,192 tokens, more than a small model's whole decoder step.

    ``"cdf"``: inverse transform sampling, one uniform u per row and the first token whose cumulative
    probability exceeds u times the row's total (summed in float64): the same distribution from B
    random numbers instead of B x V, about 20x cheaper, but not the same tokens as ``generate`` for
    a seed. A token of probability 0 (filtered by top-k / top-p) is never drawn: its cumulative sum
    equals its predecessor's, and ``right=True`` passes over it."""
    if draw == "multinomial":
        return torch.multinomial(probs, num_samples=1).squeeze(1)
    cdf = probs.cumsum(-1, dtype=torch.float64)  # [B, V]
    u = torch.rand(probs.shape[0], 1, dtype=torch.float64, device=probs.device) * cdf[:, -1:]
    # u < total, so an index is found; the clamp only guards against u * total rounding up to total
    return torch.searchsorted(cdf, u, right=True).squeeze(1).clamp_(max=probs.shape[-1] - 1)


def sample_with_cache(model: torch.nn.Module, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, *,
                      max_new_tokens: int, temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0,
                      eos_ids: list[int] | tuple[int, ...] = (), pad_id: int = 0, lean: bool = True,
                      draw: str = "cdf", min_p: float | None = None, repetition_penalty: float = 1.0) -> torch.Tensor:
    """Completion ids [B, C] sampled from left-padded prompts [B, P]: a lean ``generate``.

    One prefill forward over the prompts fills the model's KV cache; then each step feeds only the B
    new tokens with their positions (``cumsum(mask) - 1``, as ``generate``) and the grown attention
    mask, penalizes repeated tokens (``penalize_repeats``, with ``repetition_penalty`` != 1), filters
    the last logits (``filter_logits``: temperature, top-k, top-p, ``min_p``), draws from the softmax (``draw_tokens``),
    writes ``pad_id`` after a row's first EOS (any of ``eos_ids``), and stops when every row has
    ended or after ``max_new_tokens``. None of ``generate``'s per-step machinery (input
    preparation, logits-processor lists, stopping criteria, output objects) runs.

    ``draw="multinomial"``: same model, same inputs, same RNG state: the same tokens as ``generate``
    with the equivalent ``GenerationConfig`` (logits in float32, one multinomial draw per step over
    [B, V], GPT-2's ``gelu_new`` as the model's own module), up to matmul reorderings where a backend
    computes the cached and uncached attention differently. ``draw="cdf"`` (default): the same
    distribution from one uniform per row (``draw_tokens``), and GPT-2's ``gelu_new`` as torch's
    one-kernel tanh GELU (as in the scoring passes: the same formula, equal up to float rounding).

    ``lean``: for GPT-2 and Llama-layout models, run the steps through ``decode.LeanDecoder`` (the
    model's own modules, a preallocated KV cache, no per-call mask building or output objects);
    other models, or ``lean=False``, call the model's ``forward`` with its cache.

    Runs under inference mode in the model's own mode, as TRL 1.16's GRPO samples (``generate`` on
    the model in training mode): an active dropout acts (the lean decoder then gives way to
    ``forward``, whose dropout draws from the RNG), activation checkpointing is suspended for the
    loop; the result is copied out of inference mode.
    """
    if draw not in DRAWS:
        raise ValueError(f"draw: expected one of {DRAWS}, got {draw!r}")
    model = unwrap(model)
    B, P = prompt_ids.shape
    device = prompt_ids.device
    with torch.inference_mode(), checkpointing_suspended(model):
        mask = torch.ones(B, P + max_new_tokens, dtype=torch.long, device=device)  # grown by slicing
        mask[:, :P] = prompt_mask
        positions = position_ids(mask[:, :P])
        decoder = lean_decoder(model, mask, scoring=draw == "cdf") if lean else None
        tokens = _decode_loop(model, decoder, prompt_ids, mask, positions, max_new_tokens, temperature,
                              top_k, top_p, eos_ids, pad_id, draw, min_p, repetition_penalty)
    return tokens.clone()


def _decode_loop(model, decoder, prompt_ids, mask, positions, max_new_tokens, temperature, top_k, top_p,
                 eos_ids, pad_id, draw, min_p=None, repetition_penalty=1.0):
    """The prefill and the token steps of ``sample_with_cache``: ids [B, steps]. Each step's tokens
    stay a [B, 1] column (the next step's input as it is) and are joined once at the end."""
    B, P = prompt_ids.shape
    device = prompt_ids.device
    if decoder is not None:
        logits, past = decoder.prefill(prompt_ids, positions)[:, -1], None
    else:
        logits, past = _cache_forward(model, prompt_ids, mask[:, :P], positions, None)
    next_pos = positions[:, -1:] + 1  # [B, 1]: left padding, so every row's last token is real
    eos = torch.tensor(list(eos_ids), dtype=torch.long, device=device)
    finished = torch.zeros(B, 1, dtype=torch.bool, device=device)
    columns = []
    seen = None
    if repetition_penalty != 1.0:  # [B, V] the tokens each row holds: the prompt's real ones, then each draw
        V = logits.shape[-1]  # ids past the LM head's vocabulary (a larger embedding) are never penalized
        real = prompt_ids.masked_fill(mask[:, :P] == 0, V).clamp(max=V)
        seen = torch.zeros(B, V + 1, dtype=torch.bool, device=device).scatter_(1, real, True)[:, :V]
    for t in range(max_new_tokens):
        if logits.dtype != torch.float32:
            logits = logits.float()
        if seen is not None:
            logits = penalize_repeats(logits, seen, repetition_penalty)
        probs = torch.softmax(filter_logits(logits, temperature, top_k, top_p, min_p), dim=-1)
        nxt = draw_tokens(probs, draw)[:, None].masked_fill_(finished, pad_id)  # [B, 1]
        columns.append(nxt)
        if seen is not None:
            seen.scatter_(1, nxt.clamp(max=seen.shape[1] - 1), True)
        if eos.numel():
            finished |= torch.isin(nxt, eos)
            if finished.all():
                break
        if t + 1 == max_new_tokens:
            break
        if decoder is not None:
            logits = decoder.forward(nxt, next_pos)[:, -1]
        else:
            logits, past = _cache_forward(model, nxt, mask[:, :P + t + 1], next_pos, past)
        next_pos += 1
    if not columns:
        return torch.full((B, 0), pad_id, dtype=torch.long, device=device)
    return torch.cat(columns, dim=1)
