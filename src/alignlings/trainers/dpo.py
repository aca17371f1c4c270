"""DPOTrainer: Direct Preference Optimization on any transformers causal LM.

Rafailov et al., "Direct Preference Optimization: Your Language Model is Secretly a Reward Model"
(2023). Each step, for a batch of ``prompt/chosen/rejected`` rows:

    score      one forward pass over [prompt+chosen rows; prompt+rejected rows], summed completion
               log-probs for each (the prompt never counts), split back into chosen and rejected;
    reference  the same sums under the frozen reference, without gradient (per batch, or once for
               the whole dataset with ``precompute_ref_log_probs``);
    loss       ``alignlings.losses.dpo.dpo_loss`` (any ``loss_type`` of ``DPO_LOSSES``);
    step       gradient accumulation, clipping and AdamW in ``BaseTrainer``;
    log        ``dpo_metrics`` (TRL's keys ``rewards/chosen``, ``rewards/rejected``,
               ``rewards/margins``, ``rewards/accuracies``, ``logps/chosen``, ``logps/rejected``)
               plus ``logits/chosen``, ``logits/rejected``, ``entropy``, ``mean_token_accuracy``,
               ``num_tokens``, ``loss``, ``grad_norm``, ``learning_rate``.

Shapes: b pairs per micro-batch, 2b rows per forward pass, T tokens.
"""

from __future__ import annotations

import copy

import torch

from alignlings.losses.dpo import dpo_loss, dpo_metrics
from alignlings.trainers.base import BaseTrainer
from alignlings.trainers.configs import DPOConfig
from alignlings.trainers.data import (
    check_columns, collate_aligned, collate_sequences, load_rows, pad_token_id, tokenize_preference, truncate,
)
from alignlings.trainers import decode
from alignlings.trainers.distributed import unwrap
from alignlings.trainers.modeling import (
    ScoredPositions, check_lean_path, completion_sums, disable_dropout, is_peft_model, prepare_model, scored_positions,
)


def _mean(rows: list[dict[str, float]]) -> dict[str, float]:
    return {k: sum(r[k] for r in rows) / len(rows) for k in rows[0]}


class DPOTrainer(BaseTrainer):
    """Train ``model`` on preference pairs with a DPO-family loss.

    Args:
        model: a transformers causal LM (the policy).
        ref_model: the frozen reference; default None = a copy of ``model`` as it is now.
        args: a ``DPOConfig``.
        train_dataset: rows with ``prompt``, ``chosen``, ``rejected`` (a ``datasets.Dataset``, a list
            of dicts, or a file path; see ``data.load_rows``).
        processing_class: the tokenizer.
        peft_config: a ``peft.PeftConfig`` (e.g. ``LoraConfig``): train adapters only; with no
            ``ref_model`` the reference is the same network with its adapters disabled (no copy), as
            TRL does.
    """

    name = "dpo"
    progress_keys = ("loss", "rewards/accuracies", "rewards/margins")

    def __init__(self, model, ref_model=None, args: DPOConfig | None = None, train_dataset=None,
                 processing_class=None, peft_config=None) -> None:
        args = args or DPOConfig()
        dataset = load_rows(train_dataset)
        check_columns(dataset, ("prompt", "chosen", "rejected"), "DPOTrainer")
        super().__init__(prepare_model(model, args, peft_config), args, dataset, processing_class)
        self.pad_id = pad_token_id(processing_class)
        self.hidden = decode.hidden_size(self.unwrapped_model)
        self.rows = [r for r in (self._tokenize(row) for row in dataset) if r is not None]
        if not self.rows:
            raise ValueError(
                f"train_dataset: every prompt fills max_length = {args.max_length} tokens, so no row keeps a "
                "completion token (TRL drops such rows too)"
            )
        # each row's prompt+chosen and prompt+rejected ids as tensors, made once: collation only pads
        self.sequences = [
            (torch.tensor(r["prompt_chosen"] + r["chosen"], dtype=torch.long),
             torch.tensor(r["prompt_rejected"] + r["rejected"], dtype=torch.long))
            for r in self.rows
        ]

        # The reference: frozen, in eval mode, on this process's device (not DDP-wrapped); with PEFT
        # and no ref_model, the policy's own base network with the adapters disabled.
        self.ref_is_base = ref_model is None and is_peft_model(self.unwrapped_model)
        ref = None
        if not self.ref_is_base:
            ref = ref_model if ref_model is not None else copy.deepcopy(self.unwrapped_model)
            ref = ref.to(self.device).eval().requires_grad_(False)
            if args.disable_dropout:
                disable_dropout(ref)
        self.ref_model, self.ref_logps = ref, None
        if args.precompute_ref_log_probs:
            with self.autocast():
                self.ref_logps = self._precompute_reference()  # [N, 2]
            self.ref_model, self.ref_is_base = None, False

        self._setup_optimizer(args.per_device_train_batch_size * args.gradient_accumulation_steps, len(self.rows))

    # -- setup -------------------------------------------------------------------------------------

    def _tokenize(self, row: dict) -> dict[str, list[int]] | None:
        """Prompt ids and the two completions' ids, cut to ``max_length``; None for a row TRL drops.

        Tokenized as TRL 1.16 does (``data.tokenize_preference``): each of prompt + chosen and
        prompt + rejected whole, split at the shared prompt. With ``keep_start`` a prompt of
        ``max_length`` tokens or more leaves no completion token, and the row is dropped, as TRL's
        ``_prepare_dataset`` does (it would otherwise count in the loss mean with no gradient)."""
        tok, mode, max_len = self.tokenizer, self.args.truncation_mode, self.args.max_length
        prompt, chosen, rejected = tokenize_preference(tok, row["prompt"], row["chosen"], row["rejected"])
        if max_len is not None and mode == "keep_start" and len(prompt) >= max_len:
            return None
        p_c, chosen = truncate(prompt, chosen, max_len, mode)
        p_r, rejected = truncate(prompt, rejected, max_len, mode)
        return {"prompt_chosen": p_c, "chosen": chosen, "prompt_rejected": p_r, "rejected": rejected}

    def collate(self, indices: list[int]) -> dict:
        """[2b, T] rows: the b prompt+chosen rows, then the b prompt+rejected rows.

        Right-padded (``collate_sequences``); or, where the pairs' shared prompts are long enough for
        the lean pass to score each once for both rows (``decode.SHARE_MIN_WORK``), with the
        prompts left-padded and the completions right-padded after them (``collate_aligned``).
        ``positions``: where the completions are scored (``modeling.scored_positions``), worked out
        once for the policy's pass and the reference's."""
        seqs = [self.sequences[i][0] for i in indices] + [self.sequences[i][1] for i in indices]
        starts = [len(self.rows[i]["prompt_chosen"]) for i in indices] + [len(self.rows[i]["prompt_rejected"]) for i in indices]
        shared = sum(len(self.rows[i]["prompt_chosen"]) for i in indices
                     if self.rows[i]["prompt_chosen"] == self.rows[i]["prompt_rejected"])
        collate = collate_aligned if shared * self.hidden >= decode.SHARE_MIN_WORK else collate_sequences
        batch = {k: v.to(self.device) for k, v in collate(seqs, starts, self.pad_id).items()}
        batch["num_tokens"] = sum(len(s) for s in seqs)  # the attention mask's count, without a tensor op
        batch["positions"] = scored_positions(batch["input_ids"], batch["attention_mask"], batch["completion_mask"],
                                              right_padded=True if collate is collate_sequences else None)
        return batch

    # -- score ---------------------------------------------------------------------------------------

    def sequence_logps(self, model, batch: dict, lean: bool = False):
        """Summed completion log-probs [2b], completion lengths [2b] and the logits of the N scored
        positions [N, V] (those that predict a completion token, row-major, so the chosen rows' come
        first; the prompt's positions never reach the LM head: ``modeling.completion_sums``)."""
        positions = batch.get("positions")
        if positions is None:
            positions = scored_positions(batch["input_ids"], batch["attention_mask"], batch["completion_mask"])
        sums, logits = completion_sums(model, batch["input_ids"], batch["attention_mask"], positions, lean=lean)
        return sums, positions.lengths, logits

    def reference_logps(self, batch: dict, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Reference sums for chosen and rejected, each [b].

        Under ``torch.inference_mode`` (no autograd bookkeeping at all, cheaper than ``no_grad``) and
        through the lean decoder where the model has one (one pass of the model's own modules without
        transformers' per-call machinery, see ``modeling.lm_logits``); the [2b] sums are copied out of
        inference mode so the loss may use them next to the policy's."""
        if self.ref_logps is not None:
            ref = self.ref_logps[indices].to(self.device)
            return ref[:, 0], ref[:, 1]
        with torch.inference_mode():
            if self.ref_is_base:
                model = unwrap(self.model)
                with model.disable_adapter():
                    ref_sum, _, _ = self.sequence_logps(model, batch, lean=self.lean)
            else:
                ref_sum, _, _ = self.sequence_logps(self.ref_model, batch, lean=self.lean)
        return ref_sum.clone().chunk(2)

    @torch.no_grad()
    def _precompute_reference(self) -> torch.Tensor:
        out = []
        n = self.args.per_device_train_batch_size
        for i in range(0, len(self.rows), n):
            indices = list(range(i, min(i + n, len(self.rows))))
            chosen, rejected = self.reference_logps(self.collate(indices), indices)
            out.append(torch.stack([chosen, rejected], dim=1).cpu())
        return torch.cat(out)  # [N, 2]

    # -- loss, step, log -----------------------------------------------------------------------------

    def training_step(self, rows: list[int]) -> dict[str, float]:
        args = self.args
        micro = self.micro_batches(rows)
        logged = []
        for i, indices in enumerate(micro):
            batch = self.collate(indices)
            if i == 0 and self.lean_check_due():
                check_lean_path(self.model, lambda lean: self.sequence_logps(self.unwrapped_model, batch, lean=lean)[0],
                                step=self.step, tolerance=args.lean_check_tolerance)
            policy_sum, lengths, logits = self.sequence_logps(self.model, batch, lean=self.lean)
            chosen, rejected = policy_sum.chunk(2)  # [b] each
            chosen_len, rejected_len = lengths.chunk(2)
            ref_chosen, ref_rejected = self.reference_logps(batch, indices)

            loss = dpo_loss(
                chosen, rejected, ref_chosen, ref_rejected, beta=args.beta, loss_type=args.loss_type,
                label_smoothing=args.label_smoothing, chosen_lengths=chosen_len, rejected_lengths=rejected_len,
            )
            self.backward(loss / len(micro) if len(micro) > 1 else loss, i, len(micro))

            logged.append({
                "loss": loss.item(),
                **dpo_metrics(chosen, rejected, ref_chosen, ref_rejected, beta=args.beta),
                **token_metrics(logits, batch["input_ids"], batch["completion_mask"], batch.get("positions")),
            })
            num_tokens = self.count_tokens(batch["num_tokens"])
        return {**_mean(logged), **num_tokens, **self.optimizer_step()}


@torch.no_grad()
def token_metrics(logits: torch.Tensor, input_ids: torch.Tensor, completion_mask: torch.Tensor,
                  positions: ScoredPositions | None = None) -> dict[str, float]:
    """TRL 1.16's per-token DPO metrics over completion positions (``_compute_loss`` in dpo_trainer.py):
    ``logits/chosen`` and ``logits/rejected`` (the mean logit), ``entropy`` (of the policy's next-token
    distribution, chosen and rejected tokens together) and ``mean_token_accuracy`` (how often the
    chosen completion's token is the policy's argmax).

    ``logits`` [N, V]: the scored positions only (where ``completion_mask[:, 1:]`` is 1, row-major, as
    ``modeling.completion_sums`` returns them); the first b of the 2b rows are the chosen ones.
    ``positions``: the batch's ``scored_positions``, when worked out already."""
    scored = completion_mask[:, 1:].bool() if positions is None else positions.scored  # [2b, T-1]: t predicts t+1
    labels = input_ids[:, 1:][scored] if positions is None else positions.labels  # [N]
    b = scored.shape[0] // 2
    N = logits.shape[0]
    n_chosen = int(scored[:b].sum())  # row-major: the first n_chosen scored positions are the chosen rows'
    z = logits.float()  # [N, V]
    logp = torch.log_softmax(z, dim=-1)
    per_position = torch.stack([  # [3, N]: mean logit, entropy, chosen token is the argmax
        z.mean(-1),
        -(logp.exp() * logp).sum(-1),
        (z.argmax(-1) == labels).float(),
    ])
    chosen, rejected = per_position[:, :n_chosen].sum(-1), per_position[:, n_chosen:].sum(-1)  # [3] each
    sums = torch.cat([chosen, rejected]).tolist()  # one read-back
    c, r = max(n_chosen, 1), max(N - n_chosen, 1)
    return {"logits/chosen": sums[0] / c, "logits/rejected": sums[3] / r,
            "entropy": (sums[1] + sums[4]) / max(N, 1), "mean_token_accuracy": sums[2] / c}
