"""Seeding and resumable checkpoints: a resumed run continues bit-for-bit like an uninterrupted one.

A checkpoint folder ``output_dir/checkpoint-<step>/`` holds

* ``model.pt``      the policy's state_dict (exact tensors; ``save_pretrained`` happens at the end),
* ``optimizer.pt``  AdamW's moments and step counts, and the learning-rate scheduler,
* ``trainer_state.json``  the step, the data position and the trainer's own small state,
* ``extra.pt``      tensors the trainer keeps between steps (GRPO's generated batch),
* ``rng_state_<rank>.pt``  Python, NumPy, torch CPU (and CUDA) generator states of each process.

Everything that decides the next step is in there, so loading it and stepping gives the same bits
as never having stopped (tested in tests/test_trainers.py).
"""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

CHECKPOINT_PREFIX = "checkpoint-"


def set_seed(seed: int) -> None:
    """Seed every generator a step draws from: Python's, NumPy's and torch's (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def checkpoint_dir(output_dir: str | Path, step: int) -> Path:
    return Path(output_dir) / f"{CHECKPOINT_PREFIX}{step}"


def list_checkpoints(output_dir: str | Path) -> list[Path]:
    """Checkpoint folders in ``output_dir``, oldest first."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and re.fullmatch(rf"{CHECKPOINT_PREFIX}\d+", p.name)]
    return sorted(found, key=lambda p: int(p.name[len(CHECKPOINT_PREFIX):]))


def resolve_checkpoint(spec: str, output_dir: str | Path) -> Path:
    """"latest" -> the newest checkpoint in ``output_dir``; otherwise the folder given."""
    if spec == "latest":
        found = list_checkpoints(output_dir)
        if not found:
            raise FileNotFoundError(f"resume_from_checkpoint: no {CHECKPOINT_PREFIX}<step> folder in {output_dir}")
        return found[-1]
    path = Path(spec)
    if not (path / "trainer_state.json").is_file():
        raise FileNotFoundError(f"resume_from_checkpoint: {path} is not a checkpoint folder (no trainer_state.json)")
    return path


def save_checkpoint(
    path: Path,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    state: dict[str, Any],
    extra: dict[str, Any] | None,
    rank: int,
    is_main: bool,
) -> None:
    """Write one checkpoint. Every process writes its RNG state; process 0 writes the rest."""
    path.mkdir(parents=True, exist_ok=True)
    torch.save(rng_state(), path / f"rng_state_{rank}.pt")
    if not is_main:
        return
    torch.save(model.state_dict(), path / "model.pt")
    torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}, path / "optimizer.pt")
    if extra is not None:
        torch.save(extra, path / "extra.pt")
    (path / "trainer_state.json").write_text(json.dumps(state, indent=2))


def load_checkpoint(
    path: Path,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    rank: int,
    device: torch.device,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Restore model, optimiser, scheduler and this process's RNG; returns (trainer state, extra)."""
    model.load_state_dict(torch.load(path / "model.pt", map_location=device, weights_only=True))
    opt = torch.load(path / "optimizer.pt", map_location=device, weights_only=True)
    optimizer.load_state_dict(opt["optimizer"])
    scheduler.load_state_dict(opt["scheduler"])
    extra_path = path / "extra.pt"
    extra = torch.load(extra_path, map_location=device, weights_only=False) if extra_path.is_file() else None
    rng_path = path / f"rng_state_{rank}.pt"
    if not rng_path.is_file():  # resumed on more processes than saved: fall back to rank 0's
        rng_path = path / "rng_state_0.pt"
    set_rng_state(torch.load(rng_path, weights_only=False))
    state = json.loads((path / "trainer_state.json").read_text())
    return state, extra


def prune_checkpoints(output_dir: str | Path, keep: int | None) -> None:
    """Delete all but the newest ``keep`` checkpoints."""
    if keep is None:
        return
    for old in list_checkpoints(output_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
