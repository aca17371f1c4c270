"""Metrics: a JSONL log, a progress bar and PNG curves, shared by the trainers.

Each training step returns a dict of floats (TRL's metric names). ``MetricsLog`` averages them over
``logging_steps`` steps, as TRL does, and appends one JSON object per logging step to
``output_dir/metrics.jsonl``: ``{"step": 10, "loss": ..., "reward": ..., ...}``. ``plot_metrics``
draws every key of that file against the step (matplotlib, Agg backend, no display needed).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any


class MetricsLog:
    """Window-averaged metrics appended to a JSONL file; only process 0 writes."""

    def __init__(self, path: str | Path, logging_steps: int, enabled: bool = True) -> None:
        self.path = Path(path)
        self.logging_steps = logging_steps
        self.enabled = enabled
        self.history: list[dict[str, float]] = []  # every logged row, for callers and tests
        self._window: dict[str, list[float]] = defaultdict(list)

    def truncate(self, after_step: int) -> None:
        """Drop logged rows past ``after_step`` (all of them for a fresh run)."""
        if not self.path.exists():
            return
        kept = [r for r in read_metrics(self.path) if r["step"] <= after_step] if after_step else []
        self.path.write_text("".join(json.dumps(r) + "\n" for r in kept))
        self.history = kept

    def add(self, step: int, metrics: dict[str, float], *, force: bool = False) -> dict[str, float] | None:
        """Record one step's metrics; every ``logging_steps`` steps (or when forced) write their mean."""
        for key, value in metrics.items():
            self._window[key].append(float(value))
        if not (force or step % self.logging_steps == 0) or not self._window:
            return None
        row = {"step": step, **{k: sum(v) / len(v) for k, v in self._window.items()}}
        self._window.clear()
        self.history.append(row)
        if self.enabled:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as f:
                f.write(json.dumps(row) + "\n")
        return row


def read_metrics(path: str | Path) -> list[dict[str, float]]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class Progress:
    """A rich progress bar over optimiser steps showing a few live metrics; silent when disabled."""

    def __init__(self, total: int, description: str, *, enabled: bool = True, start: int = 0,
                 show: tuple[str, ...] = ("loss",), console: Any = None) -> None:
        self.enabled = enabled
        self.show = show
        if not enabled:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
        from rich.progress import Progress as RichProgress
        from rich.table import Column

        # Counters and times never shrink; on a narrow console (80 columns under torchrun or a pipe)
        # the metrics text is cut with an ellipsis instead of the step count ("20/…").
        def fixed():
            return Column(no_wrap=True)

        self._bar = RichProgress(
            TextColumn("[bold]{task.description}", table_column=fixed()), BarColumn(bar_width=20, table_column=fixed()),
            MofNCompleteColumn(table_column=fixed()), TimeElapsedColumn(table_column=fixed()),
            TimeRemainingColumn(table_column=fixed()),
            TextColumn("{task.fields[info]}", table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis")),
            expand=True, console=console,
        )
        self._task = self._bar.add_task(description, total=total, completed=start, info="")

    def __enter__(self) -> Progress:
        if self.enabled:
            self._bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.enabled:
            self._bar.__exit__(*exc)

    def update(self, metrics: dict[str, float] | None = None) -> None:
        if not self.enabled:
            return
        info = ""
        if metrics:
            info = "  ".join(f"{k}={metrics[k]:.4g}" for k in self.show if k in metrics)
        self._bar.update(self._task, advance=1, **({"info": info} if info else {}))


def plot_metrics(rows: list[dict[str, float]], path: str | Path, *, title: str = "",
                 keys: list[str] | None = None, first: tuple[str, ...] = ()) -> Path:
    """One small panel per metric against the step (the ``first`` ones first); returns the PNG's path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if keys is None:
        keys = [k for k in (rows[0] if rows else {}) if k != "step"]
        keys += sorted({k for r in rows for k in r} - set(keys) - {"step"})
        keys = [k for k in first if k in keys] + [k for k in keys if k not in first]
    n = max(len(keys), 1)
    cols = min(3, n)
    nrows = math.ceil(n / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 2.8 * nrows), squeeze=False)
    for ax, key in zip(axes.flat, keys):
        points = [(r["step"], r[key]) for r in rows if key in r]
        if points:
            xs, ys = zip(*points)
            ax.plot(xs, ys, marker="." if len(xs) < 40 else None)
        ax.set_title(key, fontsize=9)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 0.97) if title else None)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
