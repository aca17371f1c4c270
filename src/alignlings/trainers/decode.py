"""A lean decoder: the model's own layers without transformers' per-call machinery.

Sampling 16 tokens for 8 rows from a small model spends most of its time outside arithmetic: every
``model(...)`` call builds a causal mask (``create_causal_mask``), wraps the cache in ``Cache``
objects, fills output dataclasses, reads the config through layers of ``__getattribute__`` and
passes keyword arguments down four wrappers. ``LeanDecoder`` keeps the arithmetic and drops the rest:

* it calls the model's own modules (embeddings, norms, projections, MLP, LM head), so weights,
  activation functions, LoRA adapters injected by peft, and those modules' hooks are exactly the
  model's; stock layers without hooks (``nn.Linear``, ``nn.LayerNorm``, ``nn.Embedding``, GPT-2's
  ``Conv1D``) are called as the functions they wrap, which skips ``nn.Module``'s call overhead;
* the modules whose forward it replaces (the model, its decoder layers, their attention) cannot run
  hooks, so a hook on one of them, or a global module hook, sends the pass through ``forward``;
* it rewrites only attention: keys and values go into a cache preallocated for the whole sample
  ([B, H_kv, P + max_new_tokens, D] per layer), and ``scaled_dot_product_attention`` reads the
  filled prefix with a boolean mask built once (causal, and no padded key);
* positions are the caller's (``cumsum(mask) - 1``, as ``generate`` numbers them);
* GPT-2's hidden state runs as [B * T, E] rows (each projection one ``addmm``), and a module called
  as a module still sees [B, T, ...];
* what a decoder makes of the model's modules (its plan) is made once per model and reused while
  the modules, and which of them have hooks, stay the same; parameters are read at each call, so a
  replaced parameter is the one used (``lean_decoder``);
* in scoring passes GPT-2's ``gelu_new`` runs as torch's one-kernel tanh GELU (the same formula;
  transformers ships it as ``GELUTanh``); the sampler keeps the model's own activation module.

Supported (``LEAN_MODELS``): GPT-2 (``GPT2LMHeadModel``: absolute positions) and the Llama layout
(rotary positions from the model's own ``rotary_emb``, grouped-query attention): ``LlamaForCausalLM``,
``Qwen2ForCausalLM`` (with or without sliding-window layers), ``Qwen3ForCausalLM`` (q/k norms),
``MistralForCausalLM`` (sliding window) and ``GemmaForCausalLM`` (scaled embedding, (1 + w) norms);
in eval mode, or in training mode with every dropout at 0 and activation checkpointing off.
``lean_decoder`` returns None for any other model (Gemma 2 and 3, with their soft-capping and extra
norms, among them) or setting, and callers then use the model's ``forward`` (the general path).

Two uses: the GRPO sampler (``modeling.sample_with_cache``: a prefill, then one token per row per
step) and ``lean_logits``, one pass over whole sequences without a cache for scoring (DPO's policy
and reference, GRPO's loss pass and its reference and old log-probs; autograd runs through it as
through ``forward``). Logits and gradients equal ``forward``'s up to float rounding
(``tests/test_trainers_decode.py``), and seeded draws give the very tokens ``generate`` gives
(``tests/test_trainers_sampler.py``).

Why one long module: the lean decoder's plan, its validity check and the per-architecture passes
must change together (a value read at one place and not the other is the drift the parity tests
guard); each architecture's pass is a short function.
"""

from __future__ import annotations

import functools
import weakref
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.modules import module as module_mod

from alignlings.trainers.versions import lean_path_tested


def _hooked(module: torch.nn.Module) -> bool:
    """True when ``module`` has a forward, forward-pre or backward hook of its own."""
    state = module.__dict__  # plain reads: nn.Module.__getattr__ is slow
    return bool(state["_forward_hooks"] or state["_forward_pre_hooks"] or state["_backward_hooks"]
                or state.get("_backward_pre_hooks"))


def _global_hooks() -> bool:
    """True when a hook registered for every module (``register_module_forward_hook`` and kin) exists."""
    return bool(module_mod._global_forward_hooks or module_mod._global_forward_pre_hooks
                or module_mod._global_backward_hooks or module_mod._global_backward_pre_hooks)


def _direct(module: Any) -> Any:
    """``module``'s forward as a plain function when it is a stock layer without hooks.

    Calling a module costs a few microseconds of dispatch (hooks, ``__call__``, ``forward``); a
    GPT-2 token step makes a dozen such calls per layer. A layer with hooks, or of any other class
    (a peft LoRA layer, a quantised linear), is called as the module, so what it adds still runs."""
    if _hooked(module) or _global_hooks():
        return module
    kind = type(module)
    # the parameters are read from the module's own dict at each call: a decoder's plan outlives a
    # pass (``lean_decoder``), and a parameter replaced in between (``module.weight = Parameter(...)``,
    # ``load_state_dict(assign=True)``) must be the one used
    p = module.__dict__["_parameters"]
    if kind is torch.nn.Linear:
        return lambda x: F.linear(x, p["weight"], p["bias"])
    if kind is torch.nn.LayerNorm:
        # eps and the shape too are read at each call: a plan outlives a pass, and ``module.eps = ...``
        # after the first pass must act as it does in ``forward``
        d = module.__dict__
        return lambda x: F.layer_norm(x, d["normalized_shape"], p["weight"], p["bias"], d["eps"])
    if kind.__name__ == "Conv1D" and kind.__module__.startswith("transformers."):  # GPT-2's x @ W + b
        nf = module.nf
        # [N, in] rows (the GPT-2 decoder's flat layout) in one kernel; any other shape via [N, in]
        return lambda x: torch.addmm(p["bias"], x, p["weight"]) if x.dim() == 2 else \
            torch.addmm(p["bias"], x.reshape(-1, x.shape[-1]), p["weight"]).view(*x.shape[:-1], nf)
    if kind is torch.nn.Embedding and module.max_norm is None and not module.sparse and not module.scale_grad_by_freq:
        pad = module.padding_idx  # padding_idx: that row gets no gradient
        return lambda x: F.embedding(x, p["weight"], pad)
    return module


#: A shared prefix runs once per distinct row only when the work it skips, (B - distinct rows) x
#: prefix length x hidden size, reaches this. Below it the second pass's fixed cost (a decoder with a
#: cache, explicit masks, twice the kernel calls) outweighs the arithmetic saved: on the benchmark's
#: tiny model (8 DPO pairs of ~6-token prompts, width 64: 3k) sharing made a step ~1.7x slower; at the
#: mid size (width 256; DPO 8 x 96 prompt positions: 197k, GRPO 7 x 64: 115k) and at GPT-2 small's
#: (width 768; DPO 2 x 96, GRPO 3 x 64: 147k) it saves a fifth of the step or more.
SHARE_MIN_WORK = 32768

#: Prefix sharing on (default) or off for the whole process: ``decode.PREFIX_SHARING = False`` makes
#: every row run its whole sequence, as ``forward`` and TRL do (the same results; the benchmark's
#: "sharing off" cases measure the same work as TRL with it).
PREFIX_SHARING = True


def hidden_size(model: Any) -> int:
    """The model's hidden width (``hidden_size``; GPT-2 maps it to ``n_embd``), 1 when unknown."""
    return int(getattr(getattr(_base(model), "config", None), "hidden_size", 1) or 1)


def may_share(B: int, width: int | None, hidden: int = 1) -> bool:
    """False when sharing a prefix of ``width`` positions among B rows could not reach
    ``SHARE_MIN_WORK`` even if all B rows held the same one; checked before looking for repeats
    (``torch.unique`` over rows is a slow kernel, ~20-100 us on the benchmark's tiny batches)."""
    if not PREFIX_SHARING:
        return False
    return width is None or (B - 1) * width * hidden >= SHARE_MIN_WORK


def distinct_rows(rows: torch.Tensor, width: int | None = None,
                  hidden: int = 1) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(first, inverse) for a [B, K] tensor with repeated rows: ``first`` [U] the index of each distinct
    row's first occurrence, ``inverse`` [B] which distinct row each row is; None when all B differ, or
    when ``(B - U) * width * hidden`` (the work sharing would skip) is under ``SHARE_MIN_WORK``."""
    if not may_share(rows.shape[0], width, hidden):
        return None  # even if all B rows were one, sharing would skip too little: no torch.unique
    distinct, inverse = torch.unique(rows, dim=0, return_inverse=True)
    B, U = rows.shape[0], distinct.shape[0]
    if U == B or (width is not None and (B - U) * width * hidden < SHARE_MIN_WORK):
        return None
    first = torch.full((U,), B, dtype=torch.long, device=rows.device)
    first = first.scatter_reduce(0, inverse, torch.arange(B, device=rows.device), reduce="amin")
    return first, inverse


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

    ``called``: the modules this decoder calls as modules (their hooks and submodules run); every
    other module of the model is replaced by the decoder's own arithmetic, so ``lean_decoder``
    refuses a model where one of those carries a hook.
    """

    #: what a decoder sets for each pass (``start``); everything else it holds is its plan: the
    #: model's layer functions and sizes, the same for every pass (``plan``, ``from_plan``)
    PASS_STATE = frozenset({"model", "key_mask", "length", "cache", "_rows", "_inverse", "hooked", "keys",
                            "values", "unpadded", "right_padded"})

    def __init__(self, model: Any, key_mask: torch.Tensor, n_kv_heads: int, head_dim: int,
                 n_layers: int, cache: bool = True) -> None:
        self.dims = (n_kv_heads, head_dim, n_layers)
        self.called: list[torch.nn.Module] = []
        self.start(model, key_mask, cache)

    def start(self, model: Any, key_mask: torch.Tensor, cache: bool) -> None:
        """The state of one pass (or one cached sample): the key mask, and with ``cache`` the keys and
        values preallocated for every position of ``key_mask``."""
        self.model = model
        self.key_mask = key_mask.bool()
        self.length = 0  # keys written so far
        self.cache = cache  # False: one pass over whole sequences, keys and values used as computed
        # during a shared prefill (``prefill``): the distinct rows computed, and each row's one of them
        self._rows: torch.Tensor | None = None
        self._inverse: torch.Tensor | None = None
        self.hooked = False  # a module of the model has hooks: they see the batch forward would give
        if cache:
            p = next(model.parameters())
            autocast = torch.is_autocast_enabled(p.device.type)
            dtype = torch.get_autocast_dtype(p.device.type) if autocast else p.dtype
            n_kv_heads, head_dim, n_layers = self.dims
            shape = (key_mask.shape[0], n_kv_heads, key_mask.shape[1], head_dim)
            self.keys = [torch.empty(shape, dtype=dtype, device=p.device) for _ in range(n_layers)]
            self.values = [torch.empty(shape, dtype=dtype, device=p.device) for _ in range(n_layers)]

    def plan(self) -> dict[str, Any]:
        """What this decoder made of its model (layer functions, sizes, the modules it calls)."""
        return {k: v for k, v in self.__dict__.items() if k not in self.PASS_STATE}

    @classmethod
    def from_plan(cls, plan: dict[str, Any], model: Any, key_mask: torch.Tensor, cache: bool) -> LeanDecoder:
        """A decoder of ``cls`` for a new pass over the model ``plan`` was made from."""
        decoder = cls.__new__(cls)
        decoder.__dict__.update(plan)
        decoder.start(model, key_mask, cache)
        return decoder

    @functools.cached_property
    def unpadded(self) -> bool:
        """No padded key at all (GRPO's G copies of one prompt): a one-token step attends every key."""
        return bool(self.key_mask.all())

    @functools.cached_property
    def right_padded(self) -> bool:
        """Real tokens first, padding (if any) after them in every row, as in DPO's batches. Worked out
        from the mask when first needed; a caller that knows it (``lean_logits(right_padded=...)``)
        sets it and saves the two checks."""
        return self.unpadded or bool((self.key_mask[:, :-1] >= self.key_mask[:, 1:]).all())

    def call(self, module: Any) -> Any:
        """``_direct(module)``, remembered in ``called``."""
        self.called.append(module)
        return _direct(module)

    def attention_mask(self, T: int, window: int | None = None) -> torch.Tensor | None:
        """[B, 1, T, L] boolean: query t sees key s when s <= its own index and s is a real token
        (and, with a sliding ``window``, s > t - window: transformers' ``sliding_window_overlay``,
        counted in cache slots as there).

        Each query also sees itself, so a padded query (whose output nobody reads) never has an
        all-masked row, which would give NaN and spread through the padded keys' values. None: plain
        causal attention (``is_causal``), which is the same when every row is right-padded; for a
        one-token step, no mask at all (the new token comes after every key), the same when no key is
        padded."""
        L = self.length + T
        if T == 1 and window is None and self.unpadded:
            return None
        if T > 1 and self.length == 0 and window is None and self.right_padded:
            # Every padded key comes after its row's real tokens, so causality alone hides it from
            # every real query: the kernel's own causal mode (None here) is the same and faster.
            return None
        key_mask = self.key_mask if self._rows is None else self.key_mask[self._rows]
        keys = key_mask[:, None, None, :L]  # [B, 1, 1, L]
        k_index = torch.arange(L, device=keys.device)[None, :]  # [1, L]
        if T == 1:
            if window is None:
                return None if self.unpadded else keys
            return keys & (k_index > L - 1 - window)
        q_index = torch.arange(self.length, L, device=keys.device)[:, None]  # [T, 1]
        causal = k_index <= q_index  # [T, L]
        if window is not None:
            causal = causal & (k_index > q_index - window)
        return (causal & keys) | (k_index == q_index)

    def masks(self, T: int, windows: list[int | None]) -> list[torch.Tensor | None]:
        """One mask per layer, each distinct window's built once."""
        built = {w: self.attention_mask(T, w) for w in set(windows)}
        return [built[w] for w in windows]

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
               scale: float, flat: bool = False) -> torch.Tensor:
        """q [B, H, T, D], new k and v [B, H_kv, T, D] -> attention output [B, T, H * D] ([B * T, H * D]
        with ``flat``)."""
        start, T = self.length, q.shape[2]
        if self._inverse is not None:  # a shared prefill: every row's cache from its distinct row's keys
            self.keys[layer][:, :, :T] = k[self._inverse]
            self.values[layer][:, :, :T] = v[self._inverse]
            keys, values = k, v
        elif self.cache:
            self.keys[layer][:, :, start: start + T] = k
            self.values[layer][:, :, start: start + T] = v
            keys = self.keys[layer][:, :, : start + T]
            values = self.values[layer][:, :, : start + T]
        else:
            keys, values = k, v
        gqa = q.shape[1] != keys.shape[1]
        # no mask: causal over a block of new tokens; a single new token sees every key (is_causal
        # would align the mask top-left and show it only the first key)
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, is_causal=mask is None and T > 1,
                                             scale=scale, enable_gqa=gqa)
        B, H, _, D = out.shape
        return out.transpose(1, 2).reshape(B * T, H * D) if flat else out.transpose(1, 2).reshape(B, T, H * D)

    def prefill(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """The first ``forward`` of a cached decoder over the prompts [B, P] -> last logits [B, 1, V],
        computing each distinct (prompt, positions, key mask) row once.

        GRPO samples G completions of each prompt, so its B prompt rows hold B / G distinct ones; a
        causal model gives identical rows identical keys, values and logits, so the prefill runs the
        distinct rows only and copies their keys and values into every row's cache (the prompt's share
        of sampling drops by a factor G). The logits are the same values as a full-batch prefill's up
        to float rounding (the matmuls see fewer rows). Where a module has hooks, every row goes
        through, so the hooks see the batch ``forward`` would give them."""
        if not self.cache or self.length or self.hooked:
            return self.forward(input_ids, positions)
        P = input_ids.shape[1]
        if not may_share(input_ids.shape[0], P, hidden_size(self.model)):
            return self.forward(input_ids, positions)
        shared = distinct_rows(torch.cat([input_ids, positions, self.key_mask[:, :P].long()], dim=1), P,
                               hidden_size(self.model))
        if shared is None:
            return self.forward(input_ids, positions)
        return self.shared_forward(input_ids, positions, *shared)

    def shared_forward(self, input_ids: torch.Tensor, positions: torch.Tensor, first: torch.Tensor,
                       inverse: torch.Tensor, keep: int = 1) -> torch.Tensor:
        """The first ``forward`` of a cached decoder, run on rows ``first`` only; row i's keys, values
        and logits are those of row ``first[inverse[i]]`` (which must hold the same tokens, positions and
        key mask). Autograd flows back through the copies (each distinct row's gradient is the sum)."""
        self._rows, self._inverse = first, inverse
        try:
            logits = self.forward(input_ids[first], positions[first], keep=keep)
        finally:
            self._rows = self._inverse = None
        return logits[inverse]

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, keep: int = 1,
                select: torch.Tensor | None = None) -> torch.Tensor:
        """input_ids, positions [B, T] -> logits of the last ``keep`` positions (0: all) [B, K, V], or
        with ``select`` (boolean [B, T], or those positions as indices [N] into the B * T flattened
        ones) the logits of the selected positions only [N, V]: the final norm and the LM head act
        per position, so the others are never computed."""
        raise NotImplementedError

    @staticmethod
    def _kept(h: torch.Tensor, keep: int, select: torch.Tensor | None = None) -> torch.Tensor:
        if select is not None:  # [N, E]: a boolean [B, T] mask, or indices into the B * T positions
            return h[select] if select.dtype == torch.bool else h.flatten(0, 1).index_select(0, select)
        return h[:, -keep:] if keep else h


class GPT2Decoder(LeanDecoder):
    def __init__(self, model: Any, key_mask: torch.Tensor, cache: bool = True, scoring: bool | None = None) -> None:
        cfg = model.config
        super().__init__(model, key_mask, cfg.n_head, cfg.n_embd // cfg.n_head, cfg.n_layer, cache)
        scoring = not cache if scoring is None else scoring
        tr = model.transformer
        self._bt = [0, 0]  # the (B, T) of the pass under way (one list, shared by decoders of one plan)
        self.wte, self.wpe = self.call_flat(tr.wte), self.call_flat(tr.wpe)
        self.ln_f, self.lm_head = self.call(tr.ln_f), self.call(model.lm_head)
        self.blocks = [self._block(block, fused_gelu=scoring) for block in tr.h]

    def call_flat(self, module: Any) -> Any:
        """``call(module)`` for the flat layout: the hidden state is [B * T, E] rows (a linear layer is
        then one ``addmm``, with no reshape around it in forward or backward). A stock layer's function
        takes the rows as they are; a module called as a module (hooks, a peft LoRA layer, another
        class) gets them back as [B, T, ...], the shape ``forward`` gives it, and its output is
        flattened again."""
        fn = self.call(module)
        if fn is not module:
            return fn
        bt = self._bt

        def run(x: torch.Tensor) -> torch.Tensor:
            out = module(x.view(*bt, *x.shape[1:]))
            return out.reshape(-1, *out.shape[2:])
        return run

    def _block(self, block: Any, fused_gelu: bool) -> dict:
        mlp = block.mlp
        if _hooked(mlp) or type(mlp).__name__ != "GPT2MLP":
            mlp_fn = self.call_flat(mlp)
        else:  # c_fc, activation, c_proj (its dropout does nothing without training or with p = 0)
            c_fc, act, c_proj = self.call_flat(mlp.c_fc), mlp.act, self.call_flat(mlp.c_proj)
            if fused_gelu and type(act).__name__ == "NewGELUActivation" and not _hooked(act):
                # GPT-2's "gelu_new" written out is six kernels; torch's tanh-approximate GELU is the same
                # formula in one (transformers' own GELUTanh: "equivalent to NewGELU ... much faster", equal
                # up to float rounding). Scoring passes only: the sampler keeps the model's activation.
                act = _gelu_tanh
            else:  # the model's own activation module; with hooks, seen in forward's shape
                act = self.call_flat(act) if _hooked(act) else act
                if act is mlp.act:
                    self.called.append(act)
            mlp_fn = lambda x: c_proj(act(c_fc(x)))  # noqa: E731
        attn = block.attn
        return {"ln_1": self.call_flat(block.ln_1), "c_attn": self.call_flat(attn.c_attn),
                "c_proj": self.call_flat(attn.c_proj), "ln_2": self.call_flat(block.ln_2), "mlp": mlp_fn, "split": attn.split_size, "head_dim": attn.head_dim,
                "attn": attn.__dict__}  # its ``scaling`` read at each call, as forward reads it

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, keep: int = 1,
                select: torch.Tensor | None = None) -> torch.Tensor:
        B, T = input_ids.shape
        self._bt[:] = B, T
        mask = self.attention_mask(T)
        # the hidden state as B * T rows, [BT, E]: every per-token layer takes it as it is
        h = self.wte(input_ids.reshape(-1)) + self.wpe(positions.reshape(-1))  # [BT, E]
        for i, blk in enumerate(self.blocks):
            x = blk["ln_1"](h)
            # [BT, 3E] -> [3, B, H, T, D]: the same strided views as split + view + transpose, in
            # three operators instead of seven (and three autograd nodes instead of seven)
            q, k, v = blk["c_attn"](x).view(B, T, 3, -1, blk["head_dim"]).permute(2, 0, 3, 1, 4).unbind(0)
            h = h + blk["c_proj"](self.attend(i, q, k, v, mask, blk["attn"]["scaling"], flat=True))
            h = h + blk["mlp"](blk["ln_2"](h))
        self.length += T
        if select is None:
            kept = self._kept(h.view(B, T, -1), keep)
        else:  # a boolean mask, or its positions as indices into the B * T rows
            kept = h[select.reshape(-1)] if select.dtype == torch.bool else h.index_select(0, select)
        logits = self.lm_head(self.ln_f(kept))  # [B, K, V] or [N, V]
        return logits


class LlamaDecoder(LeanDecoder):
    """The Llama layout: pre-norm layers of rotary attention (grouped-query) and a gated MLP.

    Covers the families that differ from Llama only in what their own modules do or in settings
    read here: Qwen2 (q/k/v biases; sliding-window layers), Qwen3 (RMSNorm on each head's queries
    and keys before the rotation), Mistral (a sliding window on every layer), Gemma (the embedding
    scaled by sqrt(hidden) inside its embedding module, RMSNorm as (1 + w), a GELU MLP)."""

    def __init__(self, model: Any, key_mask: torch.Tensor, cache: bool = True, scoring: bool | None = None) -> None:
        cfg = model.config
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        super().__init__(model, key_mask, cfg.num_key_value_heads, head_dim, cfg.num_hidden_layers, cache)
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        inner = model.model
        self.rotary = apply_rotary_pos_emb
        self.head_dim = head_dim
        self.embed, self.lm_head = self.call(inner.embed_tokens), self.call(model.lm_head)
        self.rotary_emb, self.norm = self.call(inner.rotary_emb), self.call(inner.norm)
        self.layers = []
        for layer in inner.layers:
            attn = layer.self_attn
            q_norm, k_norm = getattr(attn, "q_norm", None), getattr(attn, "k_norm", None)
            self.layers.append({
                "input_layernorm": self.call(layer.input_layernorm),
                "proj": tuple(self.call(getattr(attn, n)) for n in ("q_proj", "k_proj", "v_proj", "o_proj")),
                "q_norm": None if q_norm is None else self.call(q_norm),
                "k_norm": None if k_norm is None else self.call(k_norm),
                "post_attention_layernorm": self.call(layer.post_attention_layernorm),
                "mlp": self.call(layer.mlp),
                "attn": attn.__dict__,  # its ``scaling`` read at each call, as forward reads it
            })
        self.windows = [_window(model, layer) for layer in inner.layers]

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, keep: int = 1,
                select: torch.Tensor | None = None) -> torch.Tensor:
        B, T = input_ids.shape
        masks = self.masks(T, self.windows)
        h = self.embed(input_ids)  # [B, T, E]
        cos, sin = self.rotary_emb(h, position_ids=positions)
        shape = (B, T, -1, self.head_dim)
        for i, layer in enumerate(self.layers):
            q_proj, k_proj, v_proj, o_proj = layer["proj"]
            x = layer["input_layernorm"](h)
            q, k = q_proj(x).view(shape), k_proj(x).view(shape)  # [B, T, H, D], [B, T, H_kv, D]
            if layer["q_norm"] is not None:  # Qwen3: per-head RMSNorm over D, before the rotation
                q, k = layer["q_norm"](q), layer["k_norm"](k)
            q, k = q.transpose(1, 2), k.transpose(1, 2)  # [B, H, T, D], [B, H_kv, T, D]
            v = v_proj(x).view(shape).transpose(1, 2)
            q, k = self.rotary(q, k, cos, sin)
            h = h + o_proj(self.attend(i, q, k, v, masks[i], layer["attn"]["scaling"]))
            h = h + layer["mlp"](layer["post_attention_layernorm"](h))
        self.length += T
        logits = self.lm_head(self.norm(self._kept(h, keep, select)))  # [B, K, V] or [N, V]
        return logits


def _window(model: Any, layer: Any) -> int | None:
    """The sliding window of ``layer``'s attention (None: full attention), read where the family keeps
    it: Qwen2 / Qwen3 on the attention module (set only on ``sliding_attention`` layers), Mistral in
    the config (every layer)."""
    attn = layer.self_attn
    if "sliding_window" in attn.__dict__:
        return attn.sliding_window
    if type(model).__name__ == "MistralForCausalLM":
        return getattr(model.config, "sliding_window", None)
    return None


#: The transformers classes with a lean path, and the decoder each takes.
LEAN_MODELS = {
    "GPT2LMHeadModel": GPT2Decoder,
    "LlamaForCausalLM": LlamaDecoder,
    "MistralForCausalLM": LlamaDecoder,
    "Qwen2ForCausalLM": LlamaDecoder,
    "Qwen3ForCausalLM": LlamaDecoder,
    "GemmaForCausalLM": LlamaDecoder,
}


def _scan(model: Any) -> tuple[bool, list[torch.nn.Module], tuple[int, ...]]:
    """(blocked, hooked, layout): blocked when a training-mode forward of ``model`` would differ from
    ours (an active dropout, or activation checkpointing, which lives in transformers' layer
    wrappers); hooked, the modules with hooks of their own; layout, the identities of all the modules
    and of those with hooks (a decoder plan made for one layout serves only that layout)."""
    base = _base(model)
    blocked = bool(getattr(base, "training", False) and getattr(base.config, "attention_dropout", 0.0))
    hooked = []  # Llama's attention dropout above is a float in the config, not a module
    # every module under ``model``, walked through the plain ``_modules`` dicts: ``model.modules()``
    # builds a name for each and keeps a set of those seen, ~3x the cost, and this runs every pass
    # (a module reached twice is checked twice, which changes nothing)
    stack, ids = [model], []
    while stack:
        m = stack.pop()
        ids.append(id(m))
        state = m.__dict__  # plain attribute reads: nn.Module.__getattr__ on a missing name is slow
        if state.get("gradient_checkpointing") or (state["training"] and isinstance(m, torch.nn.Dropout) and m.p > 0):
            blocked = True
        # Llama-layout attention keeps its dropout as a float on the module (``attention_dropout``,
        # read by forward at each call), which may differ from the config's: read it here, each pass
        elif state["training"] and (state.get("attention_dropout") or 0.0) > 0:
            blocked = True
        if state["_forward_hooks"] or state["_forward_pre_hooks"] or state["_backward_hooks"] \
                or state.get("_backward_pre_hooks"):
            hooked.append(m)
        stack.extend(state["_modules"].values())
    return blocked, hooked, (*ids, -1, *map(id, hooked))


def _runs_every_hook(decoder: LeanDecoder, hooked: list[torch.nn.Module]) -> bool:
    """True when each hooked module is one the decoder calls, or lies inside one (its parent runs it)."""
    if not hooked:
        return True
    covered = {id(sub) for m in decoder.called for sub in m.modules()}
    return all(id(m) in covered for m in hooked)


def _supported(base: Any, cfg: Any) -> bool:
    """Settings of a listed class that the lean decoders do not reproduce."""
    name = type(base).__name__
    if name == "GPT2LMHeadModel":
        return not (cfg.add_cross_attention or cfg.reorder_and_upcast_attn)
    if getattr(cfg, "pretraining_tp", 1) not in (None, 1):
        return False
    if getattr(cfg, "use_bidirectional_attention", False):
        return False
    if getattr(cfg, "attn_logit_softcapping", None) or getattr(cfg, "final_logit_softcapping", None):
        return False  # soft-capped scores or logits (Gemma 2's habit): not reproduced here
    return True


#: Each model's decoder plans (what ``LeanDecoder.__init__`` makes of its modules: ~60 us of
#: attribute reads per pass on the tiny GPT-2, twice a DPO step), by (decoder class, scoring), each
#: with the module layout it was made for; dropped with the model.
_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def lean_decoder(model: Any, key_mask: torch.Tensor, cache: bool = True, scoring: bool | None = None) -> LeanDecoder | None:
    """A ``LeanDecoder`` for ``model`` (unwrapped from DDP), or None where only ``forward`` will do.

    A model qualifies when its class is in ``LEAN_MODELS``; in training mode only when no dropout is
    active (neither a ``Dropout`` module nor an attention module's ``attention_dropout``, read at each
    pass; DPO's and the reward model's default ``disable_dropout=True`` sets them to 0) and activation
    checkpointing is off; and only when every hook would run: global module hooks, or a hook on a
    module the decoder replaces (a decoder layer, an attention module, the model itself, a peft
    wrapper), send the pass through ``forward``; so does a transformers version outside
    ``versions.TESTED_TRANSFORMERS`` (with one notice)."""
    if not lean_path_tested():  # the installed transformers is not one the parity tests ran on
        return None
    base = _base(model)
    cfg = getattr(base, "config", None)
    kind = LEAN_MODELS.get(type(base).__name__)
    if kind is None or cfg is None or getattr(cfg, "is_encoder_decoder", False) or not _supported(base, cfg):
        return None
    if _global_hooks():
        return None
    blocked, hooked, layout = _scan(model)
    if blocked:
        return None
    scoring = not cache if scoring is None else scoring
    plans = _PLANS.setdefault(model, {})
    made = plans.get((kind, scoring))
    if made is not None and made[0] == layout:
        decoder = kind.from_plan(made[1], base, key_mask, cache)
    else:
        decoder = kind(base, key_mask, cache, scoring)
        if not _runs_every_hook(decoder, hooked):
            return None
        plans[(kind, scoring)] = (layout, decoder.plan())
    decoder.hooked = bool(hooked)
    return decoder


def lean_logits(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                logits_to_keep: int = 0, select: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, right_padded: bool | None = None,
                select_index: torch.Tensor | None = None) -> torch.Tensor | None:
    """[B, T, V] logits (or the last ``logits_to_keep`` positions, or [N, V] at the positions where
    the boolean ``select`` [B, T] is set) of one full pass through a ``LeanDecoder`` (no KV cache;
    autograd works through it as through ``forward``); None where ``lean_decoder`` has no decoder
    for ``model``. Positions follow the attention mask.

    With ``logits_to_keep`` = K (or a ``select`` inside the last K columns) and rows that share their
    first T - K + 1 tokens (GRPO's G completions of one prompt; DPO's chosen and rejected rows of one
    prompt), that prefix runs once per distinct row (``shared_prefix_logits``).

    ``model`` must be the bare model, not a DDP wrapper: DDP's gradient averaging is armed by its
    own ``forward`` (``modeling.lm_logits`` takes care of that).

    ``position_ids``, ``right_padded`` (whether every row's padding comes after its real tokens) and
    ``select_index`` (``select``'s positions as indices into the B * T flattened ones): what a caller
    scoring one batch with two models (DPO's policy and reference) worked out once; by default
    derived from ``attention_mask`` and ``select``."""
    if logits_to_keep and select is None:
        shared = shared_prefix_logits(model, input_ids, attention_mask, logits_to_keep)
        if shared is not None:
            return shared
    B, T = input_ids.shape
    if select is not None and may_share(B, T, hidden_size(model)) and select.any():
        # the selected positions all lie in the last K columns: a shared prefix may run once
        K = T - int(select.any(0).nonzero()[0])
        shared = shared_prefix_logits(model, input_ids, attention_mask, K)
        if shared is not None:
            return shared[select[:, -K:]]  # [N, V], row-major as h[select]
    decoder = lean_decoder(model, attention_mask, cache=False)
    if decoder is None:
        return None
    if right_padded is not None:
        decoder.right_padded = right_padded
    positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0) if position_ids is None else position_ids
    if select is not None and select_index is not None:
        select = select_index
    return decoder.forward(input_ids, positions, keep=logits_to_keep, select=select)


def shared_prefix_logits(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                         logits_to_keep: int) -> torch.Tensor | None:
    """The last ``logits_to_keep`` = K positions' logits [B, K, V] with the prefix (the first
    P = T - K + 1 tokens) computed once per distinct prefix; None when no two rows share it, or the
    model has no lean decoder, or a module has hooks (they then see the batch ``forward`` gives).

    GRPO scores G completions of each prompt: [B, P + C] rows whose prompt block repeats G times.
    A causal model gives a repeated prefix the same keys, values and hidden states in every row, so
    a first pass runs the distinct prompts (keeping the last position's logits, which score the
    first completion token) and fills every row's KV cache from them, and a second pass runs the
    B completions on top. The prompt's share of the scoring pass (forward and backward) drops by a
    factor G; logits and gradients equal the single pass's up to float rounding (autograd sums
    each distinct prompt's gradient over its rows)."""
    B, T = input_ids.shape
    P = T - logits_to_keep + 1
    if not 1 < P < T or not may_share(B, P, hidden_size(model)):
        return None
    shared = distinct_rows(torch.cat([input_ids[:, :P], attention_mask[:, :P].long()], dim=1), P, hidden_size(model))
    if shared is None:
        return None
    decoder = lean_decoder(model, attention_mask, cache=True, scoring=True)
    if decoder is None or decoder.hooked:
        return None
    positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    head = decoder.shared_forward(input_ids[:, :P], positions[:, :P], *shared, keep=1)  # [B, 1, V]
    rest = decoder.forward(input_ids[:, P:], positions[:, P:], keep=0)  # [B, K - 1, V]
    return torch.cat([head, rest], dim=1)
