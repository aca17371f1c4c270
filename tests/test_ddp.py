"""Two processes under torchrun (DDP, gloo on CPU) give the same parameters as one process.

One ``python -m torch.distributed.run --standalone --nproc_per_node 2`` launch runs DPO, the reward
model and GRPO for a few steps with 4 rows per process; this test process runs DPO and the reward
model with 8 rows on one process (the same global batch) and compares. GRPO samples with each
process's own random stream, so a 1-process run draws different completions; for it we check that
the two processes hold identical parameters after the steps (DDP kept them in sync) and that they moved.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

pytest.importorskip("transformers")

from alignlings.trainers import DPOConfig, DPOTrainer, RewardConfig, RewardTrainer  # noqa: E402
from alignlings.trainers import toy  # noqa: E402

STEPS = 3
PAIRS = [
    {"prompt": f"{a}+{b}=", "chosen": str(a + b), "rejected": str(a + b + 1 + (a % 3))}
    for a, b in [(1, 2), (10, 5), (7, 7), (9, 90), (3, 3), (25, 25), (0, 8), (12, 21),
                 (40, 2), (33, 33), (5, 55), (18, 9), (61, 7), (2, 2), (80, 19), (44, 6)]
]

WORKER = textwrap.dedent('''
    import gc, json, os, sys
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    from alignlings.trainers import (DPOConfig, DPOTrainer, GRPOConfig, GRPOTrainer, RewardConfig,
                                     RewardTrainer, toy)
    out, steps = sys.argv[1], int(sys.argv[2])
    pairs = json.loads(open(os.path.join(out, "pairs.json")).read())
    rank = int(os.environ["RANK"])
    tok = toy.make_tokenizer()
    common = dict(max_steps=steps, logging_steps=1, save_steps=0, disable_tqdm=True, save_final_model=False,
                  lr_scheduler_type="constant", per_device_train_batch_size=4)
    def model():
        return toy.make_model(tok, n_layer=2, n_embd=32, n_head=2, seed=0)
    def save(name, trainer):
        torch.save(trainer.unwrapped_model.state_dict(), os.path.join(out, f"{name}_rank{rank}.pt"))
    def settle():
        # free the last trainer's DDP wrapper at a quiet point on both processes, not whenever the
        # garbage collector happens to run during the next trainer's collectives
        dist.barrier(); gc.collect(); dist.barrier()

    t = DPOTrainer(model(), args=DPOConfig(output_dir=os.path.join(out, "dpo"), learning_rate=1e-3,
                   gradient_accumulation_steps=2, **common), train_dataset=pairs, processing_class=tok)
    t.train(); save("dpo", t); del t; settle()
    t = RewardTrainer(model(), args=RewardConfig(output_dir=os.path.join(out, "reward"), learning_rate=1e-3,
                      center_rewards_coefficient=0.01, **common), train_dataset=pairs, processing_class=tok)
    t.train(); save("reward", t); del t; settle()
    prompts = [{"prompt": p["prompt"], "answer": p["chosen"]} for p in pairs]
    def count_ones(prompts, completions, **kwargs):
        return [float(c.count("1")) for c in completions]
    t = GRPOTrainer(model(), [toy.exact_match_reward, count_ones], args=GRPOConfig(output_dir=os.path.join(out, "grpo"),
                    learning_rate=1e-2, num_generations=4, max_completion_length=3, beta=0.1,
                    scale_rewards="batch", **common), train_dataset=prompts, processing_class=tok)
    t.train(); save("grpo", t); del t; settle()
    dist.destroy_process_group()
''')


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    (out / "pairs.json").write_text(__import__("json").dumps(PAIRS))
    (out / "worker.py").write_text(WORKER)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(out / "worker.py"), str(out), str(STEPS)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)  # a "does not hang" guard, not a speed bound
    if proc.returncode != 0 and "terminate called without an active exception" in proc.stderr:
        # A rare abort inside gloo's C++ threads on a loaded 2-core machine (seen once in ~30 runs,
        # never reproduced under stress): launch once more, and say so in the test report.
        warnings.warn("torchrun: a process aborted in C++ (gloo); relaunching once\n" + proc.stderr[-1500:], stacklevel=2)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return out


def _single_process(trainer_cls, config_cls, out, **kw):
    tok = toy.make_tokenizer()
    model = toy.make_model(tok, n_layer=2, n_embd=32, n_head=2, seed=0)
    args = config_cls(output_dir=str(out), max_steps=STEPS, logging_steps=1, save_steps=0, disable_tqdm=True,
                      save_final_model=False, lr_scheduler_type="constant", learning_rate=1e-3, **kw)
    trainer = trainer_cls(model, args=args, train_dataset=PAIRS, processing_class=tok)
    trainer.train()
    return trainer.unwrapped_model.state_dict()


def _assert_close(a: dict, b: dict, atol: float) -> None:
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=atol, rtol=0, msg=lambda m, k=k: f"{k}: {m}")


@pytest.mark.slow
def test_dpo_two_processes_equal_one(ddp_run, tmp_path):
    # 2 processes x 4 rows x 2 accumulation steps == 1 process x 8 rows x 2 accumulation steps
    one = _single_process(DPOTrainer, DPOConfig, tmp_path, per_device_train_batch_size=8, gradient_accumulation_steps=2)
    two = torch.load(ddp_run / "dpo_rank0.pt")
    _assert_close(one, two, atol=1e-5)
    _assert_close(two, torch.load(ddp_run / "dpo_rank1.pt"), atol=0)
    start = toy.make_model(toy.make_tokenizer(), n_layer=2, n_embd=32, n_head=2, seed=0).state_dict()
    assert any(not torch.equal(start[k], one[k]) for k in one)  # the runs did train


@pytest.mark.slow
def test_reward_two_processes_equal_one(ddp_run, tmp_path):
    # The centring term gives the value head's bias (and ln_f's) a gradient: under the plain
    # Bradley-Terry loss theirs is exactly 0 (dL/dr_c = -dL/dr_r), so float noise of either run
    # would be all Adam sees, and Adam turns noise of any size into steps of size lr.
    one = _single_process(RewardTrainer, RewardConfig, tmp_path, per_device_train_batch_size=8,
                          center_rewards_coefficient=0.01)
    two = torch.load(ddp_run / "reward_rank0.pt")
    _assert_close(one, two, atol=1e-5)
    _assert_close(two, torch.load(ddp_run / "reward_rank1.pt"), atol=0)


@pytest.mark.slow
def test_grpo_processes_stay_in_sync(ddp_run):
    rank0, rank1 = torch.load(ddp_run / "grpo_rank0.pt"), torch.load(ddp_run / "grpo_rank1.pt")
    _assert_close(rank0, rank1, atol=0)
    start = toy.make_model(toy.make_tokenizer(), n_layer=2, n_embd=32, n_head=2, seed=0).state_dict()
    assert any(not torch.equal(start[k], rank0[k]) for k in rank0)
    lines = (ddp_run / "grpo" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == STEPS  # only process 0 writes the log


# -- exit: the process group ends after the trainer and its DDP wrapper -------------------------------
# The CLI under torchrun, with destroy_process_group (and the collectives) watched: at the moment the
# group is destroyed no DistributedDataParallel may be alive, and the last collective must be a
# barrier. Repeated launches (GRPO with activation checkpointing and bf16, the run that once hung
# at exit) must each finish within the timeout.

LAUNCHER = textwrap.dedent('''
    import gc, json, os, runpy, sys
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    out = sys.argv[1]
    calls = []
    def watch(name):
        original = getattr(dist, name)
        def wrapper(*a, **k):
            if name == "destroy_process_group":
                alive = sum(isinstance(o, DistributedDataParallel) for o in gc.get_objects())
                record = {"ddp_alive": alive, "before": calls[-1] if calls else None}
                with open(os.path.join(out, f"exit_rank{os.environ['RANK']}.json"), "w") as f:
                    json.dump(record, f)
            calls.append(name)
            return original(*a, **k)
        setattr(dist, name, wrapper)
    for name in ("barrier", "all_reduce", "all_gather", "broadcast", "destroy_process_group"):
        watch(name)
    sys.argv = ["alignlings", *sys.argv[2:]]
    runpy.run_module("alignlings", run_name="__main__")
''')

EXIT_LAUNCHES = 4


@pytest.mark.slow
def test_repeated_launches_end_the_group_after_the_trainer(tmp_path):
    import json

    prompts = [{"prompt": p["prompt"], "answer": p["chosen"]} for p in PAIRS]
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in prompts))
    tok = toy.make_tokenizer()
    toy.make_model(tok, n_layer=1, n_embd=32, n_head=2, seed=0).save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    (tmp_path / "launcher.py").write_text(LAUNCHER)
    config = tmp_path / "grpo.toml"
    config.write_text(f'model = "{tmp_path / "model"}"\ndataset = "{tmp_path / "prompts.jsonl"}"\n'
                      'reward_funcs = ["alignlings.trainers.toy:exact_match_reward"]\n[grpo]\n'
                      'per_device_train_batch_size = 4\nnum_generations = 4\nmax_completion_length = 3\n'
                      'gradient_checkpointing = true\nbf16 = true\nuse_cpu = true\nlogging_steps = 1\n'
                      'save_steps = 0\ndisable_tqdm = true\nsave_final_model = false\n')
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    for launch in range(EXIT_LAUNCHES):
        out = tmp_path / f"launch{launch}"
        out.mkdir()
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               str(tmp_path / "launcher.py"), str(out), "train", "grpo", "--config", str(config),
               "--max-steps", "2", "--output-dir", str(out / "run")]
        # a hang at exit is what this guards against: the timeout is a "does not hang" bound
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
        for rank in (0, 1):
            record = json.loads((out / f"exit_rank{rank}.json").read_text())
            assert record == {"ddp_alive": 0, "before": "barrier"}, (launch, rank, record)
        assert len((out / "run" / "metrics.jsonl").read_text().splitlines()) == 2
