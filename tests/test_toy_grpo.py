"""Toy GRPO (exercise 6): the library run reaches its stated result, and the CLI around it.

Timing is reported by benchmarks/bench_toy_grpo.py, never asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from alignlings.toy_grpo import BOS, TARGET, VOCAB_SIZE, ToyGRPOConfig, ToyGRPOResult, run_toy_grpo

pytest.importorskip("transformers")

REQUIRED_KEYS = {"p_target_initial", "p_target_final", "iterations", "train_seconds", "seed", "p_target", "loss"}


@pytest.fixture(scope="module")
def seed0() -> tuple[ToyGRPOResult, list[tuple[int, float, float]]]:
    calls: list[tuple[int, float, float]] = []
    result = run_toy_grpo(ToyGRPOConfig(seed=0), callback=lambda i, p, loss: calls.append((i, p, loss)))
    return result, calls


def test_defaults_are_exercise_6s():
    c = ToyGRPOConfig()
    assert (c.seed, c.iterations, c.group_size, c.inner_steps) == (0, 40, 32, 2)
    assert (c.lr, c.clip, c.kl_coef, c.adv_eps) == (3e-3, 0.2, 0.04, 1e-8)
    assert (VOCAB_SIZE, TARGET, BOS) == (10, 0, 9)


def test_seed0_reaches_target(seed0):
    result, _ = seed0
    assert 0.05 < result.p_target_initial < 0.2  # near uniform over 10 tokens
    assert result.p_target_final >= 0.9
    assert result.iterations == 40
    assert len(result.p_target) == 41 and len(result.loss) == 40 and len(result.reward) == 40
    assert result.p_target[0] == result.p_target_initial and result.p_target[-1] == result.p_target_final
    assert result.train_seconds > 0
    # the group's success rate follows P("a") up
    assert sum(result.reward[-5:]) / 5 > 0.8 > sum(result.reward[:5]) / 5


def test_callback_sees_every_iteration(seed0):
    result, calls = seed0
    assert [i for i, _, _ in calls] == list(range(1, 41))
    assert [p for _, p, _ in calls] == result.p_target[1:]
    assert [loss for _, _, loss in calls] == result.loss


def test_same_seed_same_curves_and_no_global_side_effects(seed0):
    torch.manual_seed(123)
    rng_before = torch.get_rng_state()
    threads_before = torch.get_num_threads()
    again = run_toy_grpo(ToyGRPOConfig(seed=0))
    assert torch.equal(torch.get_rng_state(), rng_before)
    assert torch.get_num_threads() == threads_before
    assert again.p_target == seed0[0].p_target and again.loss == seed0[0].loss


def test_to_dict_is_json_ready(seed0):
    d = json.loads(json.dumps(seed0[0].to_dict()))
    assert REQUIRED_KEYS <= d.keys()
    assert d["seed"] == 0 and d["iterations"] == 40 and len(d["p_target"]) == 41


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(5))
def test_every_seed_reaches_target(seed):
    result = run_toy_grpo(ToyGRPOConfig(seed=seed))
    assert result.p_target_final >= 0.9, f"seed {seed}: P(a) = {result.p_target_final:.3f}"


@pytest.mark.parametrize(
    ("field", "value"),
    [("iterations", 0), ("group_size", 0), ("inner_steps", -1), ("lr", 0.0), ("clip", 1.5), ("kl_coef", -0.1),
     ("adv_eps", -1.0), ("iterations", 2.0), ("seed", "0")],
)
def test_config_errors_name_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        ToyGRPOConfig(**{field: value})


def test_config_argument_checked():
    with pytest.raises(ValueError, match="config"):
        run_toy_grpo({"seed": 0})


def test_import_has_no_side_effects():
    code = (
        "import sys, torch; n = torch.get_num_threads(); s = torch.get_rng_state();"
        "import alignlings.toy_grpo;"
        "assert torch.get_num_threads() == n and torch.equal(torch.get_rng_state(), s);"
        "assert 'transformers' not in sys.modules, 'transformers imported at module import'"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runner():
    from typer.testing import CliRunner

    return CliRunner()


@pytest.fixture(scope="module")
def app():
    from alignlings.cli.app import app

    return app


def test_cli_json_last_line(runner, app):
    result = runner.invoke(app, ["train", "toy-grpo", "--json", "--iterations", "40", "--seed", "0"])
    assert result.exit_code == 0, result.output
    last = result.stdout.strip().splitlines()[-1]
    data = json.loads(last)
    assert REQUIRED_KEYS <= data.keys()
    assert data["iterations"] == 40 and data["seed"] == 0
    assert data["p_target_final"] >= 0.9
    assert len(data["p_target"]) == 41 and len(data["loss"]) == 40


def test_cli_plot_writes_png(runner, app, tmp_path):
    out = tmp_path / "curves" / "toy.png"
    result = runner.invoke(app, ["train", "toy-grpo", "--iterations", "3", "--seed", "1", "--plot", str(out)])
    assert result.exit_code == 0, result.output
    assert out.is_file()
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "P(a)" in result.stdout


@pytest.mark.parametrize("bad", ["0", "-3"])
def test_cli_rejects_bad_iterations(runner, app, bad):
    result = runner.invoke(app, ["train", "toy-grpo", "--iterations", bad])
    assert result.exit_code == 2
    assert "--iterations" in result.output


def test_cli_help_documents_the_command(runner, app):
    result = runner.invoke(app, ["train", "toy-grpo", "--help"])
    assert result.exit_code == 0
    for option in ("--seed", "--iterations", "--plot", "--json"):
        assert option in result.output


def test_cli_module_import_stays_lean():
    code = (
        "import sys, alignlings.cli.train_toy;"
        "heavy = [m for m in ('torch', 'transformers', 'matplotlib') if m in sys.modules];"
        "assert not heavy, heavy"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
