"""A lean decoder: the model's own layers without transformers' per-call machinery.

Sampling 16 tokens for 8 rows from a small model spends most of its time outside arithmetic: every
``model(...)`` call builds a causal mask (``create_causal_mask``), wraps the cache in ``Cache``
objects, fills output dataclasses, reads the config through layers of ``__getattribute__`` and
passes keyword arguments down four wrappers. ``LeanDecoder`` keeps the arithmetic and drops the rest:

* it calls the model's own modules (embeddings, norms, projections, MLP, LM head), so weights,
  activation functions, LoRA adapters injected by peft, and forward hooks are exactly the model's;
  stock layers without hooks (``nn.Linear``, ``nn.LayerNorm``, ``nn.Embedding``, GPT-2's ``Conv1D``)
  are called as the functions they wrap, which skips ``nn.Module``'s call overhead;
* it rewrites only attention: keys and values go into a cache preallocated for the whole sample
  ([B, H_kv, P + max_new_tokens, D] per layer), and ``scaled_dot_product_attention`` reads the
  filled prefix with a boolean mask built once (causal, and no padded key);
* positions are the caller's (``cumsum(mask) - 1``, as ``generate`` numbers them);
* in scoring passes GPT-2's ``gelu_new`` runs as torch's one-kernel tanh GELU (the same formula;
  transformers ships it as ``GELUTanh``); the sampler keeps the model's own activation module.

Supported: GPT-2 (``GPT2LMHeadModel``: absolute positions) and the Llama layout (``LlamaForCausalLM``,
``Qwen2ForCausalLM`` without sliding-window layers: rotary positions from the model's own
``rotary_emb``, grouped-query attention), in eval mode or in training mode with every dropout at 0
and activation checkpointing off. ``lean_decoder`` returns None for any other model or setting,
and callers then use the model's ``forward`` (the general path).

Two uses: the GRPO sampler (``modeling.sample_with_cache``: a prefill, then one token per row per
step) and ``lean_logits``, one pass over whole sequences without a cache for scoring (DPO's policy
and reference, GRPO's loss pass and its reference and old log-probs; autograd runs through it as
through ``forward``). Logits and gradients equal ``forward``'s up to float rounding
(``tests/test_trainers_decode.py``), and seeded draws give the very tokens ``generate`` gives
(``tests/test_trainers_sampler.py``).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.modules import module as module_mod


def _direct(module: Any) -> Any:
    """``module``'s forward as a plain function when it is a stock layer without hooks.

    Calling a module costs a few microseconds of dispatch (hooks, ``__call__``, ``forward``); a
    GPT-2 token step makes a dozen such calls per layer. A layer with hooks, or of any other class
    (a peft LoRA layer, a quantised linear), is called as the module, so what it adds still runs."""
    if (module._forward_hooks or module._forward_pre_hooks or module_mod._global_forward_hooks
            or module_mod._global_forward_pre_hooks):
        return module
    kind = type(module)
    if kind is torch.nn.Linear:
        w, b = module.weight, module.bias
        return lambda x: F.linear(x, w, b)
    if kind is torch.nn.LayerNorm:
        shape, w, b, eps = module.normalized_shape, module.weight, module.bias, module.eps
        return lambda x: F.layer_norm(x, shape, w, b, eps)
    if kind.__name__ == "Conv1D" and kind.__module__.startswith("transformers."):  # GPT-2's x @ W + b
        w, b, nf = module.weight, module.bias, module.nf
        return lambda x: torch.addmm(b, x.reshape(-1, x.shape[-1]), w).view(*x.shape[:-1], nf)
    if kind is torch.nn.Embedding and module.max_norm is None and not module.sparse and not module.scale_grad_by_freq:
        w, pad = module.weight, module.padding_idx  # padding_idx: that row gets no gradient
        return lambda x: F.embedding(x, w, pad)
    return module


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


def _base(model: Any) -> Any:
    """The transformers model under a peft wrapper (its modules carry the adapters)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


class LeanDecoder:
    """With ``cache``: prefill once, then one token per row per ``forward``, keys and values kept in
    its own preallocated cache. Without: a single ``forward`` over whole sequences.

    ``key_mask`` [B, P + max_new_tokens]: 1 where a key is a real token (the prompt's attention mask,
    then ones: a finished row keeps feeding pad tokens, as ``generate`` does, and nobody reads them);
    for a single pass, the sequences' attention mask.
    """

    def __init__(self, model: Any, key_mask: torch.Tensor, n_kv_heads: int, head_dim: int,
                 n_layers: int, cache: bool = True) -> None:
        self.model = model
        B, L = key_mask.shape
        self.key_mask = key_mask.bool()
        self.length = 0  # keys written so far
        self.cache = cache  # False: one pass over whole sequences, keys and values used as computed
        # real tokens first, padding (if any) after them in every row, as in DPO's batches
        self.right_padded = bool((self.key_mask[:, :-1] >= self.key_mask[:, 1:]).all())
        if cache:
            p = next(model.parameters())
            autocast = torch.is_autocast_enabled(p.device.type)
            dtype = torch.get_autocast_dtype(p.device.type) if autocast else p.dtype
            shape = (B, n_kv_heads, L, head_dim)
            self.keys = [torch.empty(shape, dtype=dtype, device=p.device) for _ in range(n_layers)]
            self.values = [torch.empty(shape, dtype=dtype, device=p.device) for _ in range(n_layers)]

    def attention_mask(self, T: int) -> torch.Tensor | None:
        """[B, 1, T, L] boolean: query t sees key s when s <= its own index and s is a real token.

        Each query also sees itself, so a padded query (whose output nobody reads) never has an
        all-masked row, which would give NaN and spread through the padded keys' values. None: plain
        causal attention (``is_causal``), which is the same when every row is right-padded."""
        L = self.length + T
        keys = self.key_mask[:, None, None, :L]  # [B, 1, 1, L]
        if T == 1:
            return keys
        if self.length == 0 and self.right_padded:
            # Every padded key comes after its row's real tokens, so causality alone hides it from
            # every real query: the kernel's own causal mode (None here) is the same and faster.
            return None
        q_index = torch.arange(self.length, L, device=keys.device)[:, None]  # [T, 1]
        k_index = torch.arange(L, device=keys.device)[None, :]  # [1, L]
        causal = k_index <= q_index  # [T, L]
        return (causal & keys) | (k_index == q_index)

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
               scale: float) -> torch.Tensor:
        """q [B, H, T, D], new k and v [B, H_kv, T, D] -> attention output [B, T, H * D]."""
        start, T = self.length, q.shape[2]
        if self.cache:
            self.keys[layer][:, :, start: start + T] = k
            self.values[layer][:, :, start: start + T] = v
            keys = self.keys[layer][:, :, : start + T]
            values = self.values[layer][:, :, : start + T]
        else:
            keys, values = k, v
        gqa = q.shape[1] != keys.shape[1]
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, is_causal=mask is None, scale=scale,
                                             enable_gqa=gqa)
        B, H, _, D = out.shape
        return out.transpose(1, 2).reshape(B, T, H * D)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, keep: int = 1) -> torch.Tensor:
        """input_ids, positions [B, T] -> logits of the last ``keep`` positions (0: all) [B, K, V]."""
        raise NotImplementedError

    @staticmethod
    def _kept(h: torch.Tensor, keep: int) -> torch.Tensor:
        return h[:, -keep:] if keep else h


class GPT2Decoder(LeanDecoder):
    def __init__(self, model: Any, key_mask: torch.Tensor, cache: bool = True) -> None:
        cfg = model.config
        super().__init__(model, key_mask, cfg.n_head, cfg.n_embd // cfg.n_head, cfg.n_layer, cache)
        tr = model.transformer
        self.wte, self.wpe, self.ln_f = _direct(tr.wte), _direct(tr.wpe), _direct(tr.ln_f)
        self.lm_head = _direct(model.lm_head)
        self.blocks = [self._block(block, fused_gelu=not cache) for block in tr.h]

    @staticmethod
    def _block(block: Any, fused_gelu: bool) -> dict:
        mlp = block.mlp
        if mlp._forward_hooks or mlp._forward_pre_hooks or type(mlp).__name__ != "GPT2MLP":
            mlp_fn = mlp
        else:  # c_fc, activation, c_proj (its dropout does nothing without training or with p = 0)
            c_fc, act, c_proj = _direct(mlp.c_fc), mlp.act, _direct(mlp.c_proj)
            if fused_gelu and type(act).__name__ == "NewGELUActivation" and not act._forward_hooks:
                # GPT-2's "gelu_new" written out is six kernels; torch's tanh-approximate GELU is the same
                # formula in one (transformers' own GELUTanh: "equivalent to NewGELU ... much faster", equal
                # up to float rounding). Scoring passes only: the sampler keeps the model's activation.
                act = _gelu_tanh
            mlp_fn = lambda x: c_proj(act(c_fc(x)))  # noqa: E731
        attn = block.attn
        return {"ln_1": _direct(block.ln_1), "c_attn": _direct(attn.c_attn), "c_proj": _direct(attn.c_proj),
                "ln_2": _direct(block.ln_2), "mlp": mlp_fn, "split": attn.split_size, "head_dim": attn.head_dim,
                "scaling": attn.scaling}

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, keep: int = 1) -> torch.Tensor:
        B, T = input_ids.shape
        mask = self.attention_mask(T)
        h = self.wte(input_ids) + self.wpe(positions)  # [B, T, E]
        for i, blk in enumerate(self.blocks):
            x = blk["ln_1"](h)
            q, k, v = blk["c_attn"](x).split(blk["split"], dim=2)  # each [B, T, E]
            q, k, v = (t.view(B, T, -1, blk["head_dim"]).transpose(1, 2) for t in (q, k, v))  # [B, H, T, D]
            h = h + blk["c_proj"](self.attend(i, q, k, v, mask, blk["scaling"]))
            h = h + blk["mlp"](blk["ln_2"](h))
        self.length += T
        logits = self.lm_head(self.ln_f(self._kept(h, keep)))  # [B, K, V]
        return logits


class LlamaDecoder(LeanDecoder):
    def __init__(self, model: Any, key_mask: torch.Tensor, cache: bool = True) -> None:
        cfg = model.config
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        super().__init__(model, key_mask, cfg.num_key_value_heads, head_dim, cfg.num_hidden_layers, cache)
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        self.rotary = apply_rotary_pos_emb
        self.head_dim = head_dim
        self.embed, self.lm_head = _direct(model.model.embed_tokens), _direct(model.lm_head)
        self.projections = [tuple(_direct(getattr(layer.self_attn, n)) for n in ("q_proj", "k_proj", "v_proj", "o_proj"))
                            for layer in model.model.layers]

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, keep: int = 1) -> torch.Tensor:
        inner = self.model.model
        B, T = input_ids.shape
        mask = self.attention_mask(T)
        h = self.embed(input_ids)  # [B, T, E]
        cos, sin = inner.rotary_emb(h, position_ids=positions)
        shape = (B, T, -1, self.head_dim)
        for i, (layer, (q_proj, k_proj, v_proj, o_proj)) in enumerate(zip(inner.layers, self.projections)):
            x = layer.input_layernorm(h)
            q = q_proj(x).view(shape).transpose(1, 2)  # [B, H, T, D]
            k = k_proj(x).view(shape).transpose(1, 2)  # [B, H_kv, T, D]
            v = v_proj(x).view(shape).transpose(1, 2)
            q, k = self.rotary(q, k, cos, sin)
            h = h + o_proj(self.attend(i, q, k, v, mask, layer.self_attn.scaling))
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        self.length += T
        logits = self.lm_head(inner.norm(self._kept(h, keep)))  # [B, K, V]
        return logits


def _stochastic_or_checkpointed(model: Any) -> bool:
    """True when a training-mode forward of ``model`` would differ from ours: an active dropout, or
    activation checkpointing (which lives in transformers' layer wrappers)."""
    if getattr(model, "training", False) and getattr(model.config, "attention_dropout", 0.0):
        return True  # Llama's attention dropout is a float in the config, not a module
    for m in model.modules():
        state = m.__dict__  # plain attribute reads: nn.Module.__getattr__ on a missing name is slow
        if state.get("gradient_checkpointing") or (state["training"] and isinstance(m, torch.nn.Dropout) and m.p > 0):
            return True
    return False


def lean_decoder(model: Any, key_mask: torch.Tensor, cache: bool = True) -> LeanDecoder | None:
    """A ``LeanDecoder`` for ``model`` (unwrapped from DDP), or None where only ``forward`` will do.

    A model in training mode qualifies only when no dropout is active (the trainers' default
    ``disable_dropout=True`` sets every dropout to 0) and activation checkpointing is off."""
    base = _base(model)
    cfg = getattr(base, "config", None)
    name = type(base).__name__
    if cfg is None or getattr(cfg, "is_encoder_decoder", False) or _stochastic_or_checkpointed(base):
        return None
    if name == "GPT2LMHeadModel":
        if cfg.add_cross_attention or cfg.reorder_and_upcast_attn:
            return None
        return GPT2Decoder(base, key_mask, cache)
    if name in ("LlamaForCausalLM", "Qwen2ForCausalLM"):
        if "sliding_attention" in (getattr(cfg, "layer_types", None) or ()):
            return None
        if getattr(cfg, "pretraining_tp", 1) not in (None, 1):
            return None
        return LlamaDecoder(base, key_mask, cache)
    return None


def lean_logits(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                logits_to_keep: int = 0) -> torch.Tensor | None:
    """[B, T, V] logits (or the last ``logits_to_keep`` positions) of one full pass through a
    ``LeanDecoder`` (no KV cache; autograd works through it as through ``forward``); None where
    ``lean_decoder`` has no decoder for ``model``. Positions follow the attention mask.

    ``model`` must be the bare model, not a DDP wrapper: DDP's gradient averaging is armed by its
    own ``forward`` (``modeling.lm_logits`` takes care of that)."""
    decoder = lean_decoder(model, attention_mask, cache=False)
    if decoder is None:
        return None
    positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    return decoder.forward(input_ids, positions, keep=logits_to_keep)
