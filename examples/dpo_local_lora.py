"""DPO with LoRA on a causal LM from a folder on your disk (no Hub access needed).

    pip install 'alignlings[peft]'
    python examples/dpo_local_lora.py MODEL_DIR PAIRS.jsonl [OUTPUT_DIR]

MODEL_DIR is any ``save_pretrained`` folder of a causal LM with its tokenizer (for example one you
downloaded earlier with ``huggingface-cli download Qwen/Qwen2.5-0.5B-Instruct --local-dir MODEL_DIR``).
PAIRS.jsonl holds one ``{"prompt": ..., "chosen": ..., "rejected": ...}`` per line, plain text or
chat messages. Only the LoRA adapters train; the reference is the same network with the adapters
disabled, so the model is held in memory once. On a GPU the run uses it and bf16; on a CPU float32.
The adapters are written to OUTPUT_DIR (load them with ``peft.PeftModel.from_pretrained``).

With no arguments it builds a tiny random GPT-2 and a few pairs in a temporary folder and runs on
them, so the script itself can be tried anywhere in a few seconds.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer

from alignlings.trainers import DPOConfig, DPOTrainer


def tiny_demo_inputs(folder: Path) -> tuple[Path, Path]:
    from alignlings.trainers import toy

    tok = toy.make_tokenizer()
    toy.make_model(tok, n_layer=2, n_embd=32, n_head=2).save_pretrained(folder / "model")
    tok.save_pretrained(folder / "model")
    pairs = [{"prompt": f"{a}+{b}=", "chosen": str(a + b), "rejected": str(a + b + 1)} for a, b in [(1, 2), (3, 4), (10, 5)]]
    (folder / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    return folder / "model", folder / "pairs.jsonl"


def main(argv: list[str]) -> None:
    if len(argv) >= 2:
        model_dir, pairs, out = Path(argv[0]), Path(argv[1]), (argv[2] if len(argv) > 2 else "runs/dpo-lora")
        target_modules = "all-linear"
    else:
        tmp = Path(tempfile.mkdtemp())
        (model_dir, pairs), out = tiny_demo_inputs(tmp), str(tmp / "out")
        target_modules = ["c_attn"]  # GPT-2's fused attention projection
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    gpu = torch.cuda.is_available()
    args = DPOConfig(
        output_dir=out, learning_rate=5e-5, beta=0.1, per_device_train_batch_size=2, gradient_accumulation_steps=4,
        num_train_epochs=1, max_length=1024, bf16=gpu, gradient_checkpointing=gpu, logging_steps=1,
    )
    lora = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=target_modules, task_type="CAUSAL_LM")
    history = DPOTrainer(model, args=args, train_dataset=str(pairs), processing_class=tokenizer, peft_config=lora).train()
    print(f"{len(history)} steps; last loss {history[-1]['loss']:.4f}; adapters in {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
