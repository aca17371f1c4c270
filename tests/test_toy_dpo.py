"""Toy DPO (the toy-dpo exercise): the library run reaches its stated result, and the CLI around it."""

from __future__ import annotations

import json

import pytest
import torch

from alignlings.toy_dpo import (
    EOS, ToyDPOConfig, completion_mask_for, preference_pairs, run_toy_dpo, sequence_logps,
)
from alignlings.toy_grpo import BOS, TARGET, build_toy_policy

pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("seed", range(5))
def test_every_seed_reaches_target(seed):
    result = run_toy_dpo(ToyDPOConfig(seed=seed))
    assert 0.05 < result.p_target_initial < 0.2  # near uniform over 10 tokens
    assert result.p_target_final >= 0.9, f"seed {seed}: P(a) = {result.p_target_final:.3f}"
    assert len(result.p_target) == 41 and len(result.loss) == 40 and len(result.margin) == 40
    # DPO's loss starts at log 2 (policy = reference) and the implicit reward margin grows
    assert result.loss[0] == pytest.approx(torch.log(torch.tensor(2.0)).item(), abs=1e-6)
    assert result.loss[-1] < 0.2 and result.margin[-1] > result.margin[0]


def test_pairs_prefer_a_over_every_other_token():
    chosen, rejected = preference_pairs()
    assert chosen.shape == rejected.shape == (9, 3)
    assert (chosen[:, 0] == BOS).all() and (chosen[:, 1] == TARGET).all() and (chosen[:, 2] == EOS).all()
    assert sorted(rejected[:, 1].tolist()) == [t for t in range(10) if t != TARGET]


def test_sequence_logps_shift_and_mask():
    torch.manual_seed(0)
    model = build_toy_policy()
    ids = torch.tensor([[BOS, 3, 1, EOS], [BOS, BOS, 4, EOS]])
    mask = completion_mask_for(ids, prompt_length=2)
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits, -1)
        expected = torch.stack([logp[b, 1, ids[b, 2]] + logp[b, 2, ids[b, 3]] for b in range(2)])
        torch.testing.assert_close(sequence_logps(model, ids, mask), expected)


def test_same_seed_same_curves_and_rng_restored():
    torch.manual_seed(7)
    before = torch.get_rng_state()
    a = run_toy_dpo(ToyDPOConfig(seed=1, steps=3))
    assert torch.equal(torch.get_rng_state(), before)
    b = run_toy_dpo(ToyDPOConfig(seed=1, steps=3))
    assert a.p_target == b.p_target and a.loss == b.loss


@pytest.mark.parametrize(("field", "value"), [("steps", 0), ("steps", 2.0), ("lr", 0.0), ("beta", -1.0), ("seed", "0")])
def test_config_errors_name_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        ToyDPOConfig(**{field: value})


def test_cli_json_and_plot(tmp_path):
    from typer.testing import CliRunner

    from alignlings.cli.app import app

    runner = CliRunner()
    out = tmp_path / "toy_dpo.png"
    result = runner.invoke(app, ["train", "toy-dpo", "--json", "--plot", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert data["steps"] == 40 and data["seed"] == 0 and data["p_target_final"] >= 0.9
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = runner.invoke(app, ["train", "toy-dpo", "--steps", "0"])
    assert bad.exit_code == 2 and "--steps" in bad.output
