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

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from alignlings.web.checkqueue import client_key
from alignlings.web.context import ctx, lang_of, render_page
from alignlings.web.runs import Run, RunManager, _library  # noqa: F401 - RunManager re-exported
from alignlings.web.i18n import ui

router = APIRouter()

class RunBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seed: int = Field(default=0, ge=0, lt=2**31, description="torch.manual_seed before the policy is built.")
    iterations: int = Field(default=40, ge=1, le=200, description="Sample-then-update rounds (exercise 6: 40).")
    delay_ms: int = Field(default=40, ge=0, le=1000, description="Pause after each iteration, to watch it learn.")


def _sse(index: int, event: str, data: dict) -> str:
    return f"id: {index}\nevent: {event}\ndata: {json.dumps(data)}\n\n"


@router.post("/api/toy-grpo/runs", tags=["toy-grpo"], status_code=201)
def start_run(request: Request, body: RunBody) -> dict:
    """Start a toy GRPO run; stream it from ``/api/toy-grpo/runs/{id}/events``."""
    run = ctx(request).toy_runs.start(body.seed, body.iterations, body.delay_ms, owner=client_key(request))
    return {"id": run.id, "seed": run.seed, "iterations": run.iterations,
            "events": f"/api/toy-grpo/runs/{run.id}/events"}


@router.get("/api/toy-grpo/runs", tags=["toy-grpo"])
def list_runs(request: Request) -> list[dict]:
    """Recent runs with their points so far (newest last)."""
    return [r.summary() for r in ctx(request).toy_runs.all("grpo")]


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
                       client={"lang": lang, "t": ui(lang),
                               "runs": [r.summary() for r in ctx(request).toy_runs.all("grpo")]})
