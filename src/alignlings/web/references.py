"""Trusted reference values computed in the background when the server starts (issue 22 §3).

The warm-up also runs every predict item's variants (cached on disk, like a learner's first
prediction would), after the code exercises. A code exercise's first check needs the reference's values and the misconceptions' behaviour
(``Grader.trusted``: a sandboxed run of pack code, cached on disk per pack version). Computed on
demand, that made the first check of an exercise on a fresh install take 10-24 s while the page
said only "Checking…". :class:`ReferenceWarmup` computes them for every code exercise, in course
order, in one background thread once the warm grader is up; a check that arrives first for an
exercise still being computed waits for that same computation (``Grader.trusted`` holds one lock
per exercise), and the page shows how far the warm-up is (``GET /api/references``).

Off with ``create_app(warm_references=False)`` or ``ALIGNLINGS_WARM_REFERENCES=0``
(``benchmarks/bench_first_check.py --no-warm-up`` measures the difference).
"""

from __future__ import annotations

import logging
import os
import threading
import time

from fastapi import APIRouter, HTTPException, Request

from alignlings.content.pack import PackError
from alignlings.web.context import ctx, lang_of
from alignlings.web.i18n import learner

router = APIRouter()
log = logging.getLogger("alignlings.web")

ENV = "ALIGNLINGS_WARM_REFERENCES"


def enabled_by_env() -> bool:
    """False when ``$ALIGNLINGS_WARM_REFERENCES`` is "0", "false", "no" or "off"."""
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


class ReferenceWarmup:
    """Progress of the background computation: per exercise key, "waiting", "computing",
    "ready" or "failed"."""

    def __init__(self, keys: list[str]):
        self.keys = list(keys)
        self.state: dict[str, str] = dict.fromkeys(self.keys, "waiting")
        self.enabled = False
        self.started: float | None = None
        self.finished: float | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def run(self, context) -> None:
        """Compute every exercise's trusted values (the warm grader first); never raises."""
        self.enabled = True
        self.started = time.perf_counter()
        try:
            grader = context.grader()
        except BaseException as exc:  # noqa: BLE001 - the first check reports the grader's problem
            log.warning("reference warm-up: no grader: %s", exc)
            self._set_all("failed")
            self.finished = time.perf_counter()
            return
        for key in self.keys:
            if self._stop.is_set():
                break
            self._set(key, "computing")
            try:
                grader.trusted(context.pack.get(key))
                self._set(key, "ready")
            except Exception as exc:  # noqa: BLE001 - that exercise's check will report it
                log.warning("reference warm-up failed on %s: %s", key, exc)
                self._set(key, "failed")
        predicted = self._warm_predict(context)
        self.finished = time.perf_counter()
        log.info("reference values ready for %d exercises and %d predict runs in %.1f s", self.done(), predicted,
                 self.finished - self.started)

    def _warm_predict(self, context) -> int:
        """Run every predict item's variants once (each cached on disk), so that no learner's first
        prediction starts a run on a cold server; returns how many are ready. Never raises."""
        from alignlings.content import predictions as pr

        ready = 0
        for ex in context.pack:
            for q in getattr(ex, "predict", None) or ():
                if self._stop.is_set():
                    return ready
                try:
                    pr.run_variant(ex, q)
                    ready += 1
                except Exception as exc:  # noqa: BLE001 - that question's answer will report it
                    log.warning("predict warm-up failed on %s/%s: %s", ex.key, q.id, exc)
        return ready

    def _set(self, key: str, state: str) -> None:
        with self._lock:
            self.state[key] = state

    def _set_all(self, state: str) -> None:
        with self._lock:
            self.state = dict.fromkeys(self.keys, state)

    def done(self) -> int:
        with self._lock:
            return sum(1 for s in self.state.values() if s in ("ready", "failed"))

    def status(self, key: str | None = None) -> dict:
        with self._lock:
            out = {"enabled": self.enabled, "total": len(self.keys),
                   "done": sum(1 for s in self.state.values() if s in ("ready", "failed")),
                   "computing": next((k for k, s in self.state.items() if s == "computing"), None),
                   "seconds": None if self.started is None else
                   round((self.finished or time.perf_counter()) - self.started, 2)}
            if key is not None:
                out["exercise"] = key
                out["state"] = self.state[key]
                out["ready"] = self.state[key] in ("ready", "failed") or not self.enabled
        return out

    def stop(self) -> None:
        self._stop.set()


def code_exercise_keys(pack) -> list[str]:
    """Every exercise graded by running code (fill-ins, bug drills), in course order."""
    return [ex.key for ex in pack if ex.kind_spec.graded_as_file]


def start(context) -> ReferenceWarmup:
    """Attach a :class:`ReferenceWarmup` to the app's context and run it in a daemon thread."""
    warmup = ReferenceWarmup(code_exercise_keys(context.pack))
    warmup.enabled = True
    context.references = warmup
    threading.Thread(target=warmup.run, args=(context,), name="alignlings-references", daemon=True).start()
    return warmup


@router.get("/api/references", tags=["meta"])
def references(request: Request, exercise: str | None = None) -> dict:
    """Progress of the background computation of the reference values: ``done`` of ``total``
    exercises, the one ``computing`` now, ``seconds`` so far; with ``?exercise=KEY`` also that
    exercise's ``state`` and whether a check of it can start at once (``ready``). ``enabled`` is
    false when the server runs without the warm-up (every check then computes its own)."""
    c = ctx(request)
    warmup = getattr(c, "references", None)
    key = None
    if exercise is not None:
        try:
            key = c.pack.get(exercise).key
        except (PackError, KeyError, ValueError):
            raise HTTPException(404, f"exercise: {exercise!r} is not in this course") from None
    if warmup is None:
        out: dict = {"enabled": False, "total": 0, "done": 0, "computing": None, "seconds": None}
        if key is not None:
            out |= {"exercise": key, "state": "unknown", "ready": True}
        return out
    if key is not None and key not in warmup.state:
        raise HTTPException(404, f"exercise: {exercise!r} is not graded by running code")
    out = warmup.status(key)
    out["message"] = learner(lang_of(request))["warming"].format(done=out["done"], total=out["total"])
    return out
