"""The toy DPO page: train the toy-dpo exercise's one-layer GPT-2 in the server and stream its curves.

The twin of the toy GRPO page (``alignlings.web.toy_grpo``), on the same run machinery
(``alignlings.web.runs.RunManager``: one run trains at a time, the others wait, each run's events
are kept for its stream). ``POST /api/toy-dpo/runs`` starts :func:`alignlings.toy_dpo.run_toy_dpo`
(the library's own code, not learner code) in a thread; ``GET /api/toy-dpo/runs/{id}/events``
streams server-sent events: ``start``, one ``point`` per optimizer step (``iteration`` = the step,
``p_target`` = P("a" | <bos>), ``loss`` = the DPO loss), then ``done`` (or ``failed``). The page
draws P("a") with the exercise's target 0.9 and the loss (it starts at log 2), one curve per seed.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from alignlings.web.checkqueue import client_key
from alignlings.web.context import ctx, lang_of, render_page
from alignlings.web.i18n import learner, ui
from alignlings.web.toy_grpo import run_events as _grpo_events

router = APIRouter()

TARGET = 0.9
"""The toy-dpo exercise's goal: P("a") > 0.9 (packs/dpo-grpo/toy-dpo)."""


class DPORunBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seed: int = Field(default=0, ge=0, lt=2**31, description="torch.manual_seed before the policy is built.")
    steps: int = Field(default=40, ge=1, le=200, description="Adam steps on the 9 pairs (the exercise: 40).")
    delay_ms: int = Field(default=40, ge=0, le=1000, description="Pause after each step, to watch it learn.")


def _dpo_run(request: Request, run_id: str):
    run = ctx(request).toy_runs.get(run_id)
    if run is None or run.kind != "dpo":
        raise HTTPException(404, f"unknown toy DPO run {run_id!r}")
    return run


@router.post("/api/toy-dpo/runs", tags=["toy-dpo"], status_code=201)
def start_run(request: Request, body: DPORunBody) -> dict:
    """Start a toy DPO run; stream it from ``/api/toy-dpo/runs/{id}/events``."""
    run = ctx(request).toy_runs.start(body.seed, body.steps, body.delay_ms, owner=client_key(request), kind="dpo")
    return {"id": run.id, "seed": run.seed, "steps": run.iterations, "iterations": run.iterations,
            "events": f"/api/toy-dpo/runs/{run.id}/events"}


@router.get("/api/toy-dpo/runs", tags=["toy-dpo"])
def list_runs(request: Request) -> list[dict]:
    """Recent toy DPO runs with their points so far (newest last)."""
    return [r.summary() for r in ctx(request).toy_runs.all("dpo")]


@router.get("/api/toy-dpo/runs/{run_id}", tags=["toy-dpo"])
def get_run(request: Request, run_id: str) -> dict:
    return _dpo_run(request, run_id).summary()


@router.get("/api/toy-dpo/runs/{run_id}/events", tags=["toy-dpo"])
async def run_events(request: Request, run_id: str):
    """Server-sent events of one run, replayed from the start (or after ``Last-Event-ID``)."""
    _dpo_run(request, run_id)
    return await _grpo_events(request, run_id)


@router.get("/toy-dpo", include_in_schema=False)
def toy_page(request: Request):
    lang = lang_of(request)
    ctx(request).toy_runs.prepare()
    t, lt = ui(lang), learner(lang)
    return render_page(request, "toy_dpo.html", nav="toy", title=lt["nav_toy_dpo"], l=lt,
                       client={"lang": lang, "t": t, "runs": [r.summary() for r in ctx(request).toy_runs.all("dpo")],
                               "toy": {"api": "/api/toy-dpo", "target": TARGET, "target_label": lt["toy_dpo_target"],
                                       "done": lt["dpo_run_done"], "x_label": lt["step"], "count_key": "steps"}})
