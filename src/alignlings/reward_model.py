"""A scalar reward model: a value head on a (usually frozen) backbone, pooled at the last real token.

Implements the reward model of RLHF (Ziegler et al., 2019; Ouyang et al., "Training language models
to follow instructions with human feedback", 2022): a language model whose final hidden state is
mapped by a linear value head to one number r(x, y), trained on preference pairs with the
Bradley-Terry loss (``alignlings.losses.reward.bradley_terry_loss``): P(y_w > y_l) = sigma(r_w - r_l).

Pooling pitfall. The reward is read at one position per sequence. Taking the last position
(``hidden[:, -1]``) is only right when no row is padded: with right padding the last position of a
short row is a pad token, so its "reward" is the hidden state of padding. transformers'
``*ForSequenceClassification`` heads (and so TRL's RewardTrainer) pool at the rightmost token that is
not ``pad_token_id``; when pad == eos (common for GPT-2 and Llama tokenizers) the real eos at the end
of a row looks like padding too, which is why they search for the first pad token and step back one.
Here we pool from the ``attention_mask`` instead: index = the rightmost position where mask == 1, which
is right for both left and right padding and does not depend on which id is used for padding.

Left padding has a second pitfall: a transformers model numbers positions 0..T-1 regardless of the
mask, so a left-padded row gets shifted position embeddings and a different reward than the same
text unpadded. When a transformers backbone accepts ``position_ids`` we pass
``cumsum(mask) - 1`` (what ``generate`` does), so the reward does not depend on the padding side.

Shapes: B = batch size, T = sequence length, H = hidden size.
"""

from __future__ import annotations

import contextlib
import inspect

import torch
from torch import nn


def _infer_hidden_dim(backbone: nn.Module) -> int:
    config = getattr(backbone, "config", None)
    hidden = getattr(config, "hidden_size", None)
    if not isinstance(hidden, int) or hidden <= 0:
        raise ValueError(
            f"hidden_dim: cannot infer it from backbone {type(backbone).__name__} "
            "(it has no config.hidden_size); pass hidden_dim=<size of the backbone's hidden states>"
        )
    return hidden


class RewardModel(nn.Module):
    """Value head ``Linear(H, 1)`` on a backbone that returns hidden states; forward gives [B] rewards.

    Args:
        backbone: either a plain module mapping input_ids [B, T] to hidden states [B, T, H], or a
            transformers model (a base model such as ``GPT2Model`` or a causal LM such as
            ``GPT2LMHeadModel``; its base model's ``last_hidden_state`` is used, so the LM head's
            [B, T, V] logits are never computed).
        hidden_dim: H; default None = ``backbone.config.hidden_size``.
        freeze_backbone: if True (default, as exercise 5), the backbone's parameters get
            ``requires_grad=False`` and it runs under ``torch.no_grad()`` (no activations are kept
            for backward), so only ``value_head`` trains. If False the whole model trains, as
            TRL's RewardTrainer does.

    Attributes:
        backbone: the backbone module.
        value_head: ``nn.Linear(hidden_dim, 1)``.
    """

    def __init__(self, backbone: nn.Module, hidden_dim: int | None = None, *, freeze_backbone: bool = True) -> None:
        super().__init__()
        if not isinstance(backbone, nn.Module):
            raise ValueError(f"backbone: expected a torch.nn.Module, got {type(backbone).__name__}")
        if hidden_dim is None:
            hidden_dim = _infer_hidden_dim(backbone)
        if isinstance(hidden_dim, bool) or not isinstance(hidden_dim, int) or hidden_dim <= 0:
            raise ValueError(f"hidden_dim: expected a positive int, got {hidden_dim!r}")
        self.backbone = backbone
        self.hidden_dim = hidden_dim
        self.freeze_backbone = bool(freeze_backbone)
        if self.freeze_backbone:
            for param in self.backbone.parameters():
                param.requires_grad_(False)
        self.value_head = nn.Linear(hidden_dim, 1)
        self._is_transformers = hasattr(backbone, "config") and hasattr(backbone, "base_model")

    def _hidden_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """Run the backbone; returns [B, T, H]."""
        if not self._is_transformers:
            out = self.backbone(input_ids)
            hidden = out if isinstance(out, torch.Tensor) else getattr(out, "last_hidden_state", None)
            if hidden is None:
                raise ValueError(
                    f"backbone: expected it to return hidden states [B, T, H] (a tensor or an output with "
                    f"last_hidden_state), got {type(out).__name__}"
                )
            return hidden

        # The base model (GPT2Model inside GPT2LMHeadModel) gives last_hidden_state without the LM head.
        model = self.backbone.base_model
        kwargs: dict = {"input_ids": input_ids, "attention_mask": attention_mask}
        if attention_mask is not None and "position_ids" in inspect.signature(model.forward).parameters:
            # Number the real tokens 0, 1, ... whatever the padding side (see the module docstring).
            kwargs["position_ids"] = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        out = model(**kwargs)
        hidden = getattr(out, "last_hidden_state", None)
        if hidden is None:  # a model whose base output has no last_hidden_state: ask for all layers
            out = self.backbone(**kwargs, output_hidden_states=True)
            hidden = out.hidden_states[-1]
        return hidden

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Rewards [B] for input_ids [B, T].

        Args:
            input_ids: [B, T] token ids (prompt and response together).
            attention_mask: optional [B, T], 1 for real tokens and 0 for padding (either side). Each
                row must have at least one real token. Without a mask no row may be padded: the
                last position is used.

        Returns:
            [B] float rewards, one per sequence.
        """
        if not isinstance(input_ids, torch.Tensor):
            raise ValueError(f"input_ids: expected a torch.Tensor of shape [B, T], got {type(input_ids).__name__}")
        if input_ids.dim() != 2 or input_ids.shape[1] == 0:
            raise ValueError(
                f"input_ids: expected a [B, T] tensor of token ids with T >= 1, got shape {tuple(input_ids.shape)}"
            )
        if input_ids.is_floating_point() or input_ids.is_complex():
            raise ValueError(f"input_ids: expected an integer tensor of token ids, got dtype {input_ids.dtype}")
        B, T = input_ids.shape
        if attention_mask is not None:
            if not isinstance(attention_mask, torch.Tensor):
                raise ValueError(
                    f"attention_mask: expected a torch.Tensor of shape {(B, T)}, got {type(attention_mask).__name__}"
                )
            if attention_mask.shape != input_ids.shape:
                raise ValueError(
                    f"attention_mask: expected the same shape as input_ids {(B, T)}, "
                    f"got shape {tuple(attention_mask.shape)}"
                )
            if not ((attention_mask == 0) | (attention_mask == 1)).all():
                raise ValueError("attention_mask: expected only 0 (padding) and 1 (real token) values")
            empty = (attention_mask == 0).all(-1).nonzero().flatten().tolist()
            if empty:
                raise ValueError(f"attention_mask: rows {empty} have no real token (all zeros); each row needs one")

        grad_context = torch.no_grad() if self.freeze_backbone else contextlib.nullcontext()
        with grad_context:
            hidden_states = self._hidden_states(input_ids, attention_mask)  # [B, T, H]
        if hidden_states.dim() != 3 or hidden_states.shape[:2] != (B, T):
            raise ValueError(
                f"backbone: expected hidden states of shape ({B}, {T}, H), got shape {tuple(hidden_states.shape)}"
            )
        if hidden_states.shape[-1] != self.hidden_dim:
            raise ValueError(
                f"hidden_dim: the value head expects {self.hidden_dim} features but the backbone returns "
                f"{hidden_states.shape[-1]}"
            )

        if attention_mask is None:
            last_index = torch.full((B,), T - 1, dtype=torch.long, device=input_ids.device)
        else:
            # Rightmost real token: positions where mask == 1 keep their index, padding counts as 0.
            positions = torch.arange(T, device=attention_mask.device)
            last_index = (attention_mask.long() * positions).max(-1).values  # [B]
        rows = torch.arange(B, device=hidden_states.device)
        last_hidden = hidden_states[rows, last_index.to(hidden_states.device)]  # [B, H]
        reward = self.value_head(last_hidden.to(self.value_head.weight.dtype)).squeeze(-1)  # [B]
        return reward
