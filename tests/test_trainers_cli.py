"""``alignlings train dpo|reward|grpo`` through Typer's runner, on a tiny model saved to a folder."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("transformers")

from typer.testing import CliRunner  # noqa: E402

from alignlings.cli.app import app  # noqa: E402
from alignlings.trainers import toy  # noqa: E402

PAIRS = [{"prompt": f"{a}+{b}=", "chosen": str(a + b), "rejected": str(a + b + 1)} for a, b in
         [(1, 2), (10, 5), (7, 7), (9, 90), (3, 3), (25, 25), (0, 8), (12, 21)]]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    tok = toy.make_tokenizer()
    toy.make_model(tok, n_layer=1, n_embd=32, n_head=2, seed=0).save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    (root / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in PAIRS))
    (root / "prompts.jsonl").write_text("".join(json.dumps({"prompt": r["prompt"], "answer": r["chosen"]}) + "\n"
                                                for r in PAIRS))
    return root


def _config(root, kind, dataset, table):
    lines = [f'model = "{root / "model"}"', f'dataset = "{root / dataset}"']
    if kind == "grpo":
        lines.append('reward_funcs = ["alignlings.trainers.toy:exact_match_reward"]')
    lines.append(f"[{kind}]")
    lines += [f"{k} = {json.dumps(v)}" for k, v in table.items()]
    path = root / f"{kind}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("kind, dataset, table", [
    ("dpo", "pairs.jsonl", {"learning_rate": 1e-3, "per_device_train_batch_size": 4, "max_steps": 50}),
    ("reward", "pairs.jsonl", {"learning_rate": 1e-3, "per_device_train_batch_size": 4, "max_steps": 50}),
    ("grpo", "prompts.jsonl", {"learning_rate": 1e-3, "per_device_train_batch_size": 8, "num_generations": 4,
                               "max_completion_length": 3, "max_steps": 50}),
])
def test_train_command_runs_config_with_overrides(files, tmp_path, kind, dataset, table):
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        config = _config(files, kind, dataset, table)
        result = CliRunner().invoke(app, [
            "train", kind, "--config", str(config), "--max-steps", "2", "--output-dir", str(tmp_path),
            "--set", "logging_steps=1", "--set", "disable_tqdm=true", "--plot",
        ])
    finally:
        torch.set_num_threads(before)
    assert result.exit_code == 0, result.output + repr(result.exception)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]  # --max-steps 2 overrode the file's 50
    assert (tmp_path / "metrics.png").is_file()


def test_bad_override_is_a_usage_error(files, tmp_path):
    config = _config(files, "dpo", "pairs.jsonl", {"max_steps": 1})
    result = CliRunner().invoke(app, ["train", "dpo", "--config", str(config), "--set", "betta=0.2"])
    assert result.exit_code == 2
    assert "unknown field" in result.output


def test_every_train_command_is_documented():
    result = CliRunner().invoke(app, ["train", "--help"])
    for name in ("dpo", "reward", "grpo", "demo"):
        assert name in result.output


def test_example_configs_are_valid():
    from pathlib import Path

    from alignlings.trainers import configs

    examples = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*_toy.toml"))
    assert {p.stem for p in examples} >= {"dpo_toy", "reward_toy", "grpo_toy"}
    classes = {"dpo": configs.DPOConfig, "reward": configs.RewardConfig, "grpo": configs.GRPOConfig}
    for path in examples:
        kind = path.stem.split("_")[0]
        raw = configs.read_toml(path)
        assert raw["model"] and raw["dataset"]
        configs.load_config(classes[kind], raw[kind])


def test_model_path_errors_name_the_option(files, tmp_path):
    from transformers import T5Config

    config = _config(files, "dpo", "pairs.jsonl", {"max_steps": 1})
    missing = CliRunner().invoke(app, ["train", "dpo", "--config", str(config), "--model", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "--model" in missing.output and "not a folder" in missing.output
    T5Config(d_model=8, d_ff=16, num_layers=1, num_heads=1, vocab_size=20).save_pretrained(tmp_path / "t5")
    wrong = CliRunner().invoke(app, ["train", "dpo", "--config", str(config), "--model", str(tmp_path / "t5")])
    assert wrong.exit_code == 2 and "not a causal LM" in wrong.output
    empty = tmp_path / "empty"
    empty.mkdir()
    bare = CliRunner().invoke(app, ["train", "dpo", "--config", str(config), "--model", str(empty)])
    assert bare.exit_code == 2 and "config.json" in bare.output


def test_an_encoder_or_a_folder_without_tokenizer_is_refused(files, tmp_path):
    """``AutoModelForCausalLM`` loads a BERT folder (as ``BertLMHeadModel``, attending both ways) and
    ``AutoTokenizer`` builds a 5-token tokenizer from nothing: both must be refused, naming --model."""
    from transformers import BertConfig, BertForMaskedLM

    config = _config(files, "dpo", "pairs.jsonl", {"max_steps": 1})
    tok = toy.make_tokenizer()
    bert = tmp_path / "bert"
    BertForMaskedLM(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=64)).save_pretrained(bert)
    tok.save_pretrained(bert)
    out = tmp_path / "out"
    encoder = CliRunner().invoke(app, ["train", "dpo", "--config", str(config), "--model", str(bert),
                                       "--output-dir", str(out)])
    assert encoder.exit_code == 2 and "--model" in encoder.output and "not causal" in encoder.output, encoder.output
    assert not (out / "metrics.jsonl").exists()
    no_tok = tmp_path / "no_tokenizer"
    toy.make_model(tok, n_layer=1, n_embd=32, n_head=2).save_pretrained(no_tok)  # weights, no tokenizer
    bare = CliRunner().invoke(app, ["train", "dpo", "--config", str(config), "--model", str(no_tok),
                                    "--output-dir", str(out)])
    assert bare.exit_code == 2 and "--model" in bare.output and "no tokenizer files" in bare.output, bare.output
    assert not (out / "metrics.jsonl").exists()


def test_is_causal_tells_decoders_from_encoders():
    from transformers import BertConfig, BertLMHeadModel

    from alignlings.trainers.modeling import is_causal

    tok = toy.make_tokenizer()
    assert is_causal(toy.make_model(tok, n_layer=1, n_embd=32, n_head=2))
    cfg = dict(vocab_size=40, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    assert not is_causal(BertLMHeadModel(BertConfig(**cfg)))
    assert is_causal(BertLMHeadModel(BertConfig(is_decoder=True, **cfg)))  # BERT run as a decoder is causal


def test_lora_from_the_config_file_and_flags(files, tmp_path):
    """TRL's ModelConfig names: lora_* keys at the file's top level, --use-peft and --lora-* flags on
    top; only the adapters train, and the final folder holds peft's adapter (not a full model)."""
    pytest.importorskip("peft")
    config = _config(files, "dpo", "pairs.jsonl", {"learning_rate": 1e-3, "per_device_train_batch_size": 4})
    config.write_text("lora_alpha = 8\nlora_dropout = 0.0\n" + config.read_text())
    result = CliRunner().invoke(app, [
        "train", "dpo", "--config", str(config), "--max-steps", "2", "--output-dir", str(tmp_path),
        "--set", "disable_tqdm=true", "--use-peft", "--lora-r", "4", "--lora-target-modules", "c_attn",
    ])
    assert result.exit_code == 0, result.output + repr(result.exception)
    adapter = json.loads((tmp_path / "adapter_config.json").read_text())
    assert (adapter["r"], adapter["lora_alpha"], adapter["target_modules"]) == (4, 8, ["c_attn"])
    assert adapter["task_type"] == "CAUSAL_LM"


@pytest.mark.parametrize("args, message", [
    (["--use-peft", "--lora-r", "0"], "lora_r"),
    (["--use-peft", "--lora-target-modules", ","], "lora_target_modules"),
])
def test_bad_lora_settings_name_the_setting(files, tmp_path, args, message):
    pytest.importorskip("peft")
    config = _config(files, "dpo", "pairs.jsonl", {"max_steps": 1})
    result = CliRunner().invoke(app, ["train", "dpo", "--config", str(config), "--output-dir", str(tmp_path), *args])
    assert result.exit_code == 2 and message in result.output, result.output
