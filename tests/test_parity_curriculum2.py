"""Layer 2 for the DPO family's reference-free and unpaired losses: kto_loss, cpo_loss, orpo_loss
against TRL 1.16's own code on the same inputs.

As in tests/test_parity_trl.py nothing of TRL is re-implemented: each TRL method runs unbound with a
stand-in ``self`` (a ``types.SimpleNamespace`` with the fields it reads) and a stand-in model.

- KTO: ``KTOTrainer._compute_loss`` (and ``_compute_kl_logps``, bound to the stand-in); the model
  returns per-token log-probs whose row sums are our summed log-probs (value in column 0), one set
  for the completions and one, without gradient, for the mismatched KL completions.
- CPO: ``CPOTrainer.get_batch_loss_metrics`` -> ``concatenated_forward`` -> ``concatenated_inputs``,
  ``get_batch_logps`` and ``cpo_loss``; the model returns fixed logits (a float64 leaf), so TRL itself
  decides which log-probs are summed and which length-averaged, and builds its NLL term.
- ORPO: ``ORPOTrainer.get_batch_loss_metrics`` the same way, ``odds_ratio_loss`` included.

Our side gets the summed completion log-probs and completion lengths (or the averages for ORPO) and
the chosen-answer NLL computed from the same logits. Values and gradients (w.r.t. the logits or the
log-probs) must agree to 1e-6. KTO and CPO agree to ~1e-15 in float64; ORPO to ~1e-7, because TRL's
``odds_ratio_loss`` casts the log-probs to float32 (``.float()``) while ours keeps float64.
"""

from __future__ import annotations

import collections
import itertools
import os
import types

import pytest
import torch
import torch.nn.functional as F

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
trl_kto = pytest.importorskip("trl.trainer.kto_trainer")
trl_cpo = pytest.importorskip("trl.experimental.cpo.cpo_trainer")
trl_orpo = pytest.importorskip("trl.experimental.orpo.orpo_trainer")

from alignlings import CPO_LOSSES, KTO_LOSSES, cpo_loss, kto_loss, orpo_loss  # noqa: E402
from alignlings.losses.orpo import orpo_log_odds  # noqa: E402

DTYPE = torch.float64
ATOL = 1e-6
SEEDS = (0, 1, 2)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _accelerator():
    return types.SimpleNamespace(
        device=torch.device("cpu"), num_processes=1, process_index=0,
        gather=lambda x: x, gather_for_metrics=lambda x: x, reduce=lambda x, reduction="sum": x,
    )


def _close(ours, theirs, what: str) -> None:
    ours = torch.as_tensor(ours, dtype=DTYPE)
    theirs = torch.as_tensor(theirs, dtype=DTYPE)
    torch.testing.assert_close(ours, theirs, rtol=0.0, atol=ATOL, msg=lambda m: f"{what}: {m}")


# ---------------------------------------------------------------------------------------------
# KTO: KTOTrainer._compute_loss
# ---------------------------------------------------------------------------------------------


def _kto_case(seed: int, N: int, n_desirable: int):
    g = torch.Generator().manual_seed(seed)
    policy = (-20 + 5 * torch.randn(N, generator=g, dtype=DTYPE)).requires_grad_()
    ref = -20 + 5 * torch.randn(N, generator=g, dtype=DTYPE)
    labels = torch.zeros(N, dtype=torch.bool)
    labels[torch.randperm(N, generator=g)[:n_desirable]] = True
    # mismatched pairs: a small positive or negative KL estimate (the clamp at 0 matters for some seeds)
    policy_kl = -20 + 5 * torch.randn(N, generator=g, dtype=DTYPE)
    ref_kl = policy_kl - 0.5 * torch.randn(N, generator=g, dtype=DTYPE)
    return policy, ref, labels, policy_kl, ref_kl


def _trl_kto(policy, ref, labels, policy_kl, ref_kl, *, beta, loss_type, desirable_weight, undesirable_weight):
    N, T = policy.shape[0], 5
    input_ids = torch.randint(0, 50, (N, T + 1))
    kl_input_ids = torch.randint(0, 50, (N, T + 1))

    def per_token(row_sums):  # [N, T] whose row sums are row_sums
        return torch.cat([row_sums.unsqueeze(1), torch.zeros(N, T - 1, dtype=DTYPE)], dim=1)

    def model(**kwargs):
        is_kl = kwargs["input_ids"] is kl_input_ids
        return types.SimpleNamespace(
            log_probs=per_token(policy_kl if is_kl else policy),
            entropy=torch.ones(N, T, dtype=DTYPE),
            mean_logits=torch.zeros(N, T, dtype=DTYPE),
        )

    model.training = True
    calculate_kl = loss_type == "kto"
    this = types.SimpleNamespace(
        model=model, accelerator=_accelerator(), beta=beta, loss_type=loss_type,
        desirable_weight=desirable_weight, undesirable_weight=undesirable_weight, calculate_KL=calculate_kl,
        precompute_ref_logps=True, aux_loss_enabled=False, args=types.SimpleNamespace(),
        _metrics=collections.defaultdict(lambda: collections.defaultdict(list)),
        _total_train_tokens=0, _tp_size=1,
    )
    this._compute_kl_logps = lambda m, batch: trl_kto.KTOTrainer._compute_kl_logps(this, m, batch)
    completion_mask = torch.ones(N, T + 1, dtype=torch.long)
    completion_mask[:, 0] = 0
    inputs = {
        "input_ids": input_ids, "attention_mask": torch.ones(N, T + 1, dtype=torch.long),
        "completion_mask": completion_mask, "label": labels,
        "KL_input_ids": kl_input_ids, "KL_attention_mask": torch.ones(N, T + 1, dtype=torch.long),
        "KL_completion_mask": completion_mask.clone(),
        "ref_logps": ref, "ref_KL_logps": ref_kl,
    }
    loss = trl_kto.KTOTrainer._compute_loss(this, model, inputs, return_outputs=False)
    return loss, {k: v[-1] for k, v in this._metrics["train"].items()}


@pytest.mark.parametrize("loss_type", sorted(KTO_LOSSES))
@pytest.mark.parametrize(("N", "n_desirable"), [(2, 1), (6, 2), (7, 7), (5, 0)])
def test_kto_loss_and_gradient_match_trl(loss_type, N, n_desirable):
    for seed, beta, (wd, wu) in itertools.product(SEEDS, (0.1, 0.5), ((1.0, 1.0), (1.33, 0.7))):
        policy, ref, labels, policy_kl, ref_kl = _kto_case(seed, N, n_desirable)
        theirs, metrics = _trl_kto(policy, ref, labels, policy_kl, ref_kl, beta=beta, loss_type=loss_type,
                                   desirable_weight=wd, undesirable_weight=wu)
        (g_theirs,) = torch.autograd.grad(theirs, (policy,))
        ours_in = policy.detach().clone().requires_grad_()
        ours = kto_loss(ours_in, ref, labels, policy_kl, ref_kl, beta=beta, loss_type=loss_type,
                        desirable_weight=wd, undesirable_weight=wu)
        (g_ours,) = torch.autograd.grad(ours, (ours_in,))
        what = f"kto {loss_type} N={N} seed={seed} beta={beta} w=({wd}, {wu})"
        _close(ours, theirs, what)
        _close(g_ours, g_theirs, what + " gradient")
        if loss_type == "kto":
            _close((policy_kl - ref_kl).mean().clamp(min=0), metrics["kl"], what + " kl")


def test_kto_kl_clamp_is_exercised():
    """Among the cases above some KL estimates are negative (clamped to 0) and some positive."""
    signs = {bool((_kto_case(s, 6, 2)[3] - _kto_case(s, 6, 2)[4]).mean() > 0) for s in range(6)}
    assert signs == {True, False}


def test_kto_kl_gets_no_gradient_and_reduction_none_keeps_input_order():
    policy, ref, labels, policy_kl, ref_kl = _kto_case(0, 6, 3)
    policy_kl = policy_kl.clone().requires_grad_()
    per = kto_loss(policy, ref, labels, policy_kl, ref_kl, beta=0.3, reduction="none")
    assert per.shape == (6,)
    z0 = (policy_kl - ref_kl).mean().clamp(min=0).detach()
    r = policy.detach() - ref
    expected = torch.where(labels, 1 - torch.sigmoid(0.3 * (r - z0)), 1 - torch.sigmoid(0.3 * (z0 - r)))
    torch.testing.assert_close(per.detach(), expected)
    assert not per.sum().requires_grad or torch.autograd.grad(per.sum(), policy_kl, allow_unused=True)[0] is None


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"loss_type": "kl"}, "loss_type"), ({"beta": 0.0}, "beta"), ({"desirable_weight": -1.0}, "desirable_weight"),
     ({"undesirable_weight": -0.1}, "undesirable_weight"), ({"reduction": "avg"}, "reduction")],
)
def test_kto_errors_name_the_argument(kwargs, name):
    policy, ref, labels, policy_kl, ref_kl = _kto_case(0, 4, 2)
    with pytest.raises(ValueError, match=name):
        kto_loss(policy, ref, labels, policy_kl, ref_kl, **kwargs)


def test_kto_input_errors():
    policy, ref, labels, policy_kl, ref_kl = _kto_case(0, 4, 2)
    with pytest.raises(ValueError, match="policy_kl_logps"):
        kto_loss(policy, ref, labels)
    with pytest.raises(ValueError, match="labels"):
        kto_loss(policy, ref, torch.tensor([0, 1, 2, 1]), policy_kl, ref_kl)
    with pytest.raises(ValueError, match="ref_logps"):
        kto_loss(policy, ref[:3], labels, policy_kl, ref_kl)
    # apo_zero_unpaired needs no KL inputs
    assert torch.isfinite(kto_loss(policy, ref, labels, loss_type="apo_zero_unpaired"))


# ---------------------------------------------------------------------------------------------
# CPO and ORPO: get_batch_loss_metrics on a stand-in model's logits
# ---------------------------------------------------------------------------------------------

V, PROMPT = 11, 3


def _pair_batch(seed: int, B: int):
    """Right-padded chosen/rejected rows of different lengths, prompt tokens labelled -100."""
    g = torch.Generator().manual_seed(seed)
    batch = {}
    for side in ("chosen", "rejected"):
        lengths = torch.randint(1, 6, (B,), generator=g)  # completion tokens per row
        width = PROMPT + int(lengths.max())
        ids = torch.randint(0, V, (B, width), generator=g)
        mask = torch.zeros(B, width, dtype=torch.long)
        labels = torch.full((B, width), -100)
        for i, n in enumerate(lengths.tolist()):
            mask[i, : PROMPT + n] = 1
            labels[i, PROMPT: PROMPT + n] = ids[i, PROMPT: PROMPT + n]
        ids = ids.masked_fill(mask == 0, 0)
        batch.update({f"{side}_input_ids": ids, f"{side}_attention_mask": mask, f"{side}_labels": labels})
    width = max(batch["chosen_input_ids"].shape[1], batch["rejected_input_ids"].shape[1])
    logits = (2 * torch.randn(2 * B, width, V, generator=g, dtype=DTYPE)).requires_grad_()
    return batch, logits


def _pad(t: torch.Tensor, width: int, value: int) -> torch.Tensor:
    return F.pad(t, (0, width - t.shape[1]), value=value)


def _ours_inputs(batch, logits):
    """Summed completion log-probs, completion lengths, and the two NLLs, from the same logits."""
    B = batch["chosen_labels"].shape[0]
    width = logits.shape[1]
    labels = torch.cat([_pad(batch["chosen_labels"], width, -100), _pad(batch["rejected_labels"], width, -100)])
    targets = labels[:, 1:]
    mask = targets != -100
    per_token = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    summed = (per_token * mask).sum(-1)  # [2B]
    lengths = mask.sum(-1)  # [2B]
    # CPO's NLL: chosen completion tokens; ORPO's: chosen prompt + completion tokens (attention mask)
    cpo_nll = F.cross_entropy(logits[:B, :-1].reshape(-1, V), targets[:B].reshape(-1), ignore_index=-100)
    ids = _pad(batch["chosen_input_ids"], width, 0)
    att = _pad(batch["chosen_attention_mask"], width, 0)
    orpo_targets = torch.where(att == 1, ids, -100)[:, 1:]
    orpo_nll = F.cross_entropy(logits[:B, :-1].reshape(-1, V), orpo_targets.reshape(-1), ignore_index=-100)
    return summed[:B], summed[B:], lengths[:B], lengths[B:], cpo_nll, orpo_nll


def _stand_in(trainer_cls, logits, **fields):
    def model(*args, **kwargs):
        return types.SimpleNamespace(logits=logits)

    this = types.SimpleNamespace(accelerator=_accelerator(), is_encoder_decoder=False, pad_token_id=0,
                                 padding_value=0, aux_loss_enabled=False, **fields)
    this.concatenated_inputs = trainer_cls.concatenated_inputs
    this.get_batch_logps = trainer_cls.get_batch_logps
    this.concatenated_forward = lambda m, b: trainer_cls.concatenated_forward(this, m, b)
    return this, model


@pytest.mark.parametrize("loss_type", sorted(CPO_LOSSES))
@pytest.mark.parametrize("B", [1, 3, 6])
def test_cpo_loss_and_gradient_match_trl(loss_type, B):
    settings = itertools.product(SEEDS, (0.1, 2.0), (0.0, 0.2), (0.0, 1.0), (0.5, 1.4))
    for seed, beta, eps, alpha, gamma in settings:
        if loss_type in ("hinge", "ipo") and eps:  # these ignore label_smoothing in TRL and here
            continue
        batch, logits = _pair_batch(seed, B)
        this, model = _stand_in(trl_cpo.CPOTrainer, logits, loss_type=loss_type, beta=beta, label_smoothing=eps,
                                cpo_alpha=alpha, simpo_gamma=gamma, alpha=0.0)
        this.cpo_loss = lambda c, r: trl_cpo.CPOTrainer.cpo_loss(this, c, r)
        theirs, metrics = trl_cpo.CPOTrainer.get_batch_loss_metrics(this, model, batch)
        (g_theirs,) = torch.autograd.grad(theirs, (logits,))

        pc, pr, lc, lr, nll, _ = _ours_inputs(batch, logits)
        ours = cpo_loss(pc, pr, beta=beta, loss_type=loss_type, label_smoothing=eps, simpo_gamma=gamma,
                        cpo_alpha=alpha, nll_loss=nll, chosen_lengths=lc, rejected_lengths=lr)
        (g_ours,) = torch.autograd.grad(ours, (logits,))
        what = f"cpo {loss_type} B={B} seed={seed} beta={beta} eps={eps} alpha={alpha} gamma={gamma}"
        _close(ours, theirs, what)
        _close(g_ours, g_theirs, what + " gradient")
        _close(nll.detach(), metrics["nll_loss"] if alpha else nll.detach(), what + " nll")


def test_cpo_sum_vs_average_matters():
    """ipo/simpo compare averages: passing summed log-probs without lengths is refused, and the two differ."""
    batch, logits = _pair_batch(4, 5)
    pc, pr, lc, lr, _, _ = _ours_inputs(batch, logits)
    with pytest.raises(ValueError, match="chosen_lengths"):
        cpo_loss(pc, pr, loss_type="simpo", cpo_alpha=0.0)
    averaged = cpo_loss(pc, pr, loss_type="ipo", cpo_alpha=0.0, chosen_lengths=lc, rejected_lengths=lr)
    summed = cpo_loss(pc, pr, loss_type="ipo", cpo_alpha=0.0, chosen_lengths=torch.ones_like(lc),
                      rejected_lengths=torch.ones_like(lr))
    assert not torch.allclose(averaged, summed)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"loss_type": "dpo"}, "loss_type"), ({"beta": -1.0}, "beta"), ({"label_smoothing": 1.5}, "label_smoothing"),
     ({"cpo_alpha": -0.5}, "cpo_alpha"), ({}, "nll_loss"), ({"nll_loss": torch.ones(2, 2)}, "nll_loss")],
)
def test_cpo_errors_name_the_argument(kwargs, name):
    pc, pr = -torch.rand(3, dtype=DTYPE) * 10, -torch.rand(3, dtype=DTYPE) * 10
    with pytest.raises(ValueError, match=name):
        cpo_loss(pc, pr, **kwargs)


@pytest.mark.parametrize("B", [1, 3, 6])
def test_orpo_loss_and_gradient_match_trl(B):
    for seed, beta in itertools.product(SEEDS, (0.1, 0.25, 1.0)):
        batch, logits = _pair_batch(seed, B)
        this, model = _stand_in(trl_orpo.ORPOTrainer, logits, beta=beta)
        this.odds_ratio_loss = lambda c, r: trl_orpo.ORPOTrainer.odds_ratio_loss(this, c, r)
        theirs, metrics = trl_orpo.ORPOTrainer.get_batch_loss_metrics(this, model, batch)
        (g_theirs,) = torch.autograd.grad(theirs, (logits,))

        pc, pr, lc, lr, _, nll = _ours_inputs(batch, logits)
        ours = orpo_loss(pc / lc, pr / lr, beta=beta, nll_loss=nll)
        (g_ours,) = torch.autograd.grad(ours, (logits,))
        what = f"orpo B={B} seed={seed} beta={beta}"
        _close(ours, theirs, what)
        _close(g_ours, g_theirs, what + " gradient")
        _close(orpo_log_odds(pc / lc, pr / lr).mean().detach(), metrics["log_odds_chosen"], what + " log_odds")


def test_orpo_is_stable_where_the_odds_saturate():
    """Average log-probs at (or a hair below) 0: TRL's form gives inf / NaN gradients, ours stays finite."""
    for dtype in (torch.float32, torch.float64):
        chosen = torch.tensor([0.0, -1e-30, -2.0, -1e-3], dtype=dtype, requires_grad=True)
        rejected = torch.tensor([-3.0, -0.5, 0.0, -1e-3], dtype=dtype, requires_grad=True)
        loss = orpo_loss(chosen, rejected, beta=0.1, reduction="none")
        loss.sum().backward()
        assert torch.isfinite(loss).all(), loss
        assert torch.isfinite(chosen.grad).all() and torch.isfinite(rejected.grad).all()
        # a certain chosen answer (odds -> inf) costs nothing; a certain rejected one costs a lot
        assert loss[0] < 1e-6 and loss[2] > 5.0
        assert loss[3].item() == pytest.approx(0.1 * torch.log(torch.tensor(2.0)).item(), rel=1e-3)
        # TRL's own code: NaN gradient for the saturated chosen answer
        this = types.SimpleNamespace(beta=0.1, accelerator=_accelerator())
        c2 = chosen.detach().clone().requires_grad_()
        losses, *_ = trl_orpo.ORPOTrainer.odds_ratio_loss(this, c2, rejected.detach())
        (-losses.sum()).backward()
        assert not torch.isfinite(c2.grad).all()


def test_orpo_rejects_positive_log_probs_and_bad_nll():
    with pytest.raises(ValueError, match="policy_rejected_logps"):
        orpo_loss(torch.tensor([-1.0]), torch.tensor([0.5]))
    with pytest.raises(ValueError, match="nll_loss"):
        orpo_loss(torch.tensor([-1.0, -2.0]), torch.tensor([-1.5, -0.5]), nll_loss=torch.ones(3))
    with pytest.raises(ValueError, match="beta"):
        orpo_loss(torch.tensor([-1.0]), torch.tensor([-2.0]), beta=-0.1)
