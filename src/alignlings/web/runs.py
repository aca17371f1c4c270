"""Toy training runs in the server (GRPO, DPO and PPO): start, queue, stream events, stop at shutdown.

``RunManager`` trains :func:`alignlings.toy_grpo.run_toy_grpo`, :func:`alignlings.toy_dpo.run_toy_dpo`
or :func:`alignlings.toy_ppo.run_toy_ppo` (the library's own code, never learner code) in a thread per
run, one at a time (torch's random generator is global to the process), and keeps each run's events
for the page's server-sent event stream. A run's ``kind`` ("grpo", "dpo" or "ppo") picks the trainer;
for DPO, ``iterations`` counts optimizer steps. Every ``point`` event has ``iteration``, ``p_target``
and ``loss`` (PPO: the policy loss), PPO's also its ``score``, ``kl``, ``clipfrac``, ``policy_loss``
and ``value_loss``; PPO's ``done`` adds ``score_final``.

Limits: ``max_runs`` runs training or waiting in the server, and ``max_per_owner`` of them per owner
(a learner, ``ADDRESS#learner:ID``) and per remote address, so one learner, or one person under
several names, cannot hold every slot (``checkqueue.client_key`` makes the owner key).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from alignlings.web.checkqueue import QueueFull, _address

KEEP_FINISHED = 20
KINDS = ("grpo", "dpo", "ppo")


class _Stopped(Exception):
    pass


@dataclass
class Run:
    id: str
    seed: int
    iterations: int
    delay_ms: int
    owner: str = ""
    status: str = "queued"  # queued, running, done, error
    events: list[dict] = field(default_factory=list)
    kind: str = "grpo"  # which toy: "grpo", "dpo" or "ppo" (alignlings.toy_grpo, toy_dpo, toy_ppo)

    def summary(self) -> dict:
        points = [e["data"] for e in self.events if e["event"] == "point"]
        done = next((e["data"] for e in self.events if e["event"] in ("done", "failed")), None)
        return {"id": self.id, "kind": self.kind, "seed": self.seed, "iterations": self.iterations,
                "status": self.status, "points": points, "result": done}


class RunManager:
    def __init__(self, max_runs: int = 2, max_per_owner: int | None = None):
        if max_per_owner is None:
            max_per_owner = max_runs
        if max_runs < 1 or max_per_owner < 1:
            raise ValueError(f"max_runs and max_per_owner: expected >= 1, got {max_runs} and {max_per_owner}")
        self.max_runs, self.max_per_owner = max_runs, max_per_owner
        self._runs: OrderedDict[str, Run] = OrderedDict()
        self._lock = threading.Lock()
        self._train_lock = threading.Lock()
        self._stop = threading.Event()
        self._prepared = False

    def active(self) -> int:
        with self._lock:
            return sum(1 for r in self._runs.values() if r.status in ("queued", "running"))

    def get(self, run_id: str) -> Run | None:
        with self._lock:
            return self._runs.get(run_id)

    def all(self, kind: str | None = None) -> list[Run]:
        """Every kept run, or only those of one ``kind``."""
        with self._lock:
            return [r for r in self._runs.values() if kind is None or r.kind == kind]

    def start(self, seed: int, iterations: int, delay_ms: int, owner: str = "", kind: str = "grpo") -> Run:
        if kind not in KINDS:
            raise ValueError(f"kind: expected one of {KINDS}, got {kind!r}")
        with self._lock:
            live = [r for r in self._runs.values() if r.status in ("queued", "running")]
            if len(live) >= self.max_runs:
                raise QueueFull(f"{self.max_runs} toy runs already training or waiting")
            if sum(r.owner == owner for r in live) >= self.max_per_owner:
                raise QueueFull(f"you already have a toy run training or waiting (limit {self.max_per_owner} "
                                "per learner); wait for it to finish")
            if sum(_address(r.owner) == _address(owner) for r in live) >= self.max_per_owner:
                raise QueueFull(f"a toy run from your address is already training or waiting (limit "
                                f"{self.max_per_owner} per address); wait for it to finish")
            run = Run(id=secrets.token_hex(6), seed=seed, iterations=iterations, delay_ms=delay_ms, owner=owner,
                      kind=kind)
            self._runs[run.id] = run
            finished = [k for k, r in self._runs.items() if r.status in ("done", "error")]
            for k in finished[: max(0, len(finished) - KEEP_FINISHED)]:
                del self._runs[k]
        threading.Thread(target=self._train, args=(run,), name=f"toy-{run.kind}-{run.id}", daemon=True).start()
        return run

    def _emit(self, run: Run, event: str, data: dict) -> None:
        with self._lock:
            run.events.append({"event": event, "data": data})

    def _train(self, run: Run) -> None:
        with self._train_lock:
            if self._stop.is_set():
                run.status = "error"
                self._emit(run, "failed", {"message": "server shutting down"})
                return
            run.status = "running"
            self._emit(run, "start", {"id": run.id, "seed": run.seed, "iterations": run.iterations})
            try:
                toy = _library(run.kind)

                def callback(iteration: int, metrics: dict) -> None:
                    if self._stop.is_set():
                        raise _Stopped
                    self._emit(run, "point", {"iteration": iteration, **metrics})
                    if run.delay_ms:
                        time.sleep(run.delay_ms / 1000)

                result, done = _train_toy(toy, run, callback)
                run.status = "done"
                self._emit(run, "done", {"seed": run.seed, "p_target_initial": result.p_target_initial,
                                         "p_target_final": result.p_target_final, "iterations": done,
                                         "train_seconds": result.train_seconds,
                                         **({"score_final": result.score_final} if run.kind == "ppo" else {})})
            except _Stopped:
                run.status = "error"
                self._emit(run, "failed", {"message": "stopped: the server is shutting down"})
            except Exception as exc:  # noqa: BLE001 - a failed run is reported to the page
                run.status = "error"
                self._emit(run, "failed", {"message": f"{type(exc).__name__}: {exc}"})

    def prepare(self) -> None:
        """Import torch and transformers in the background (once), so that the first Run is quick.

        Called when the toy GRPO page is opened: the import takes seconds on a small machine."""
        with self._lock:
            if self._prepared:
                return
            self._prepared = True

        def load():
            try:
                _library()
            except Exception:  # noqa: BLE001 - the run itself will report the problem
                pass

        threading.Thread(target=load, name="toy-grpo-imports", daemon=True).start()

    def close(self) -> None:
        self._stop.set()


_import_lock = threading.Lock()


def _train_toy(toy, run: Run, callback) -> tuple:
    """Train ``run`` with its kind's library module ``toy``, calling ``callback(iteration, metrics)``
    (metrics with at least ``p_target`` and ``loss``); returns (result, iterations done)."""
    if run.kind == "ppo":
        def ppo_point(iteration: int, metrics: dict) -> None:
            callback(iteration, {**metrics, "loss": metrics["policy_loss"]})

        result = toy.run_toy_ppo(toy.ToyPPOConfig(seed=run.seed, iterations=run.iterations), callback=ppo_point)
        return result, result.iterations

    def point(iteration: int, p_target: float, loss: float) -> None:
        callback(iteration, {"p_target": p_target, "loss": loss})

    if run.kind == "dpo":
        result = toy.run_toy_dpo(toy.ToyDPOConfig(seed=run.seed, steps=run.iterations), callback=point)
        return result, result.steps
    result = toy.run_toy_grpo(toy.ToyGRPOConfig(seed=run.seed, iterations=run.iterations), callback=point)
    return result, result.iterations


def _library(kind: str = "grpo"):
    """``alignlings.toy_grpo`` (or ``toy_dpo``, ``toy_ppo`` for kind "dpo", "ppo") with transformers' GPT-2 loaded
    (torch is imported only here).

    One thread at a time: transformers' lazy module is not safe to import from two threads at once
    (the page's background preparation and a run started right after)."""
    with _import_lock:
        import alignlings.toy_grpo as toy
        from transformers import GPT2LMHeadModel

        del GPT2LMHeadModel  # imported for its side effect: transformers' lazy module resolved
        if kind == "dpo":
            import alignlings.toy_dpo as toy_dpo

            return toy_dpo
        if kind == "ppo":
            import alignlings.toy_ppo as toy_ppo

            return toy_ppo
        return toy
