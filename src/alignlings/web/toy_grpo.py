"""The toy GRPO page: train exercise 6's one-layer GPT-2 in the server and stream its curves.

``POST /api/toy-grpo/runs`` starts :func:`alignlings.toy_grpo.run_toy_grpo` (the library's own
code, not learner code) in a thread; ``GET /api/toy-grpo/runs/{id}/events`` streams server-sent
events: ``start``, one ``point`` per iteration (``iteration``, ``p_target``, ``loss``), then
``done`` (or ``error``). The page draws them on a <canvas>; each run (seed) is its own curve.

Only one run trains at a time: torch's random generator is global to the process, so two runs at
once would interleave their draws and neither would be reproducible. ``max_runs`` counts the run
training plus those waiting; one more is refused with 429. Training takes well under a second,
so each iteration is followed by a short pause (``delay_ms``) to let a person watch it learn.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from alignlings.web.app import ctx, lang_of, render_page
from alignlings.web.guard import QueueFull
from alignlings.web.i18n import ui

router = APIRouter()

KEEP_FINISHED = 20


class RunBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seed: int = Field(default=0, ge=0, lt=2**31, description="torch.manual_seed before the policy is built.")
    iterations: int = Field(default=40, ge=1, le=200, description="Sample-then-update rounds (exercise 6: 40).")
    delay_ms: int = Field(default=40, ge=0, le=1000, description="Pause after each iteration, to watch it learn.")


class _Stopped(Exception):
    pass


@dataclass
class Run:
    id: str
    seed: int
    iterations: int
    delay_ms: int
    status: str = "queued"  # queued, running, done, error
    events: list[dict] = field(default_factory=list)

    def summary(self) -> dict:
        points = [e["data"] for e in self.events if e["event"] == "point"]
        done = next((e["data"] for e in self.events if e["event"] in ("done", "failed")), None)
        return {"id": self.id, "seed": self.seed, "iterations": self.iterations, "status": self.status,
                "points": points, "result": done}


class RunManager:
    def __init__(self, max_runs: int = 2):
        self.max_runs = max_runs
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

    def all(self) -> list[Run]:
        with self._lock:
            return list(self._runs.values())

    def start(self, seed: int, iterations: int, delay_ms: int) -> Run:
        with self._lock:
            if sum(1 for r in self._runs.values() if r.status in ("queued", "running")) >= self.max_runs:
                raise QueueFull(f"{self.max_runs} toy GRPO runs already training or waiting")
            run = Run(id=secrets.token_hex(6), seed=seed, iterations=iterations, delay_ms=delay_ms)
            self._runs[run.id] = run
            finished = [k for k, r in self._runs.items() if r.status in ("done", "error")]
            for k in finished[: max(0, len(finished) - KEEP_FINISHED)]:
                del self._runs[k]
        threading.Thread(target=self._train, args=(run,), name=f"toy-grpo-{run.id}", daemon=True).start()
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
                toy = _library()

                def callback(iteration: int, p_target: float, loss: float) -> None:
                    if self._stop.is_set():
                        raise _Stopped
                    self._emit(run, "point", {"iteration": iteration, "p_target": p_target, "loss": loss})
                    if run.delay_ms:
                        time.sleep(run.delay_ms / 1000)

                config = toy.ToyGRPOConfig(seed=run.seed, iterations=run.iterations)
                result = toy.run_toy_grpo(config, callback=callback)
                run.status = "done"
                self._emit(run, "done", {"seed": run.seed, "p_target_initial": result.p_target_initial,
                                         "p_target_final": result.p_target_final, "iterations": result.iterations,
                                         "train_seconds": result.train_seconds})
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


def _library():
    """``alignlings.toy_grpo`` with transformers' GPT-2 loaded (torch is imported only here).

    One thread at a time: transformers' lazy module is not safe to import from two threads at once
    (the page's background preparation and a run started right after)."""
    with _import_lock:
        import alignlings.toy_grpo as toy
        from transformers import GPT2LMHeadModel

        del GPT2LMHeadModel  # imported for its side effect: transformers' lazy module resolved
        return toy


def _sse(index: int, event: str, data: dict) -> str:
    return f"id: {index}\nevent: {event}\ndata: {json.dumps(data)}\n\n"


@router.post("/api/toy-grpo/runs", tags=["toy-grpo"], status_code=201)
def start_run(request: Request, body: RunBody) -> dict:
    """Start a toy GRPO run; stream it from ``/api/toy-grpo/runs/{id}/events``."""
    run = ctx(request).toy_runs.start(body.seed, body.iterations, body.delay_ms)
    return {"id": run.id, "seed": run.seed, "iterations": run.iterations,
            "events": f"/api/toy-grpo/runs/{run.id}/events"}


@router.get("/api/toy-grpo/runs", tags=["toy-grpo"])
def list_runs(request: Request) -> list[dict]:
    """Recent runs with their points so far (newest last)."""
    return [r.summary() for r in ctx(request).toy_runs.all()]


@router.get("/api/toy-grpo/runs/{run_id}", tags=["toy-grpo"])
def get_run(request: Request, run_id: str) -> dict:
    run = ctx(request).toy_runs.get(run_id)
    if run is None:
        raise HTTPException(404, f"unknown run {run_id!r}")
    return run.summary()


@router.get("/api/toy-grpo/runs/{run_id}/events", tags=["toy-grpo"])
async def run_events(request: Request, run_id: str):
    """Server-sent events of one run, replayed from the start (or after ``Last-Event-ID``)."""
    run = ctx(request).toy_runs.get(run_id)
    if run is None:
        raise HTTPException(404, f"unknown run {run_id!r}")
    last = request.headers.get("last-event-id", "")
    start = int(last) + 1 if last.isdigit() else 0

    async def stream():
        i = start
        yield "retry: 1000\n\n"
        while True:
            events = run.events  # appended by the training thread; reading a prefix is safe
            while i < len(events):
                e = events[i]
                yield _sse(i, e["event"], e["data"])
                i += 1
                if e["event"] in ("done", "failed"):
                    return
            await asyncio.sleep(0.05)  # Starlette cancels this generator when the client goes away

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


@router.get("/toy-grpo", include_in_schema=False)
def toy_page(request: Request):
    lang = lang_of(request)
    ctx(request).toy_runs.prepare()
    return render_page(request, "toy_grpo.html", nav="toy", title=ui(lang)["nav_toy"],
                       client={"lang": lang, "t": ui(lang), "runs": [r.summary() for r in ctx(request).toy_runs.all()]})
