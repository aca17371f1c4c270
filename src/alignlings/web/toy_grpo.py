"""The toy GRPO page: train exercise 6's one-layer GPT-2 in the server and stream its curves.

``POST /api/toy-grpo/runs`` starts :func:`alignlings.toy_grpo.run_toy_grpo` (the library's own
code, not learner code) in a thread; ``GET /api/toy-grpo/runs/{id}/events`` streams server-sent
events: ``start``, one ``point`` per iteration (``iteration``, ``p_target``, ``loss``), then
``done`` (or ``failed``). The page draws them on a <canvas>; each run (seed) is its own curve.

Only one run trains at a time: torch's random generator is global to the process, so two runs at
once would interleave their draws and neither would be reproducible. ``max_runs`` counts the run
training plus those waiting; one more is refused with 429. Training takes well under a second,
so each iteration is followed by a short pause (``delay_ms``) to let a person watch it learn.
The routes and the page are the toy pages' shared ones (``alignlings.web.toys``).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import Field

from alignlings.web import toys
from alignlings.web.runs import Run, RunManager, _library  # noqa: F401 - re-exported

router = APIRouter()
_sse = toys.sse


class RunBody(toys.ToyRunBody):
    iterations: int = Field(default=40, ge=1, le=200, description="Sample-then-update rounds (exercise 6: 40).")


_routes = toys.add_run_api(router, "grpo", RunBody, "iterations")
start_run, list_runs, get_run, run_events = (_routes[k] for k in ("start_run", "list_runs", "get_run", "run_events"))


@router.get("/toy-grpo", include_in_schema=False)
def toy_page(request: Request):
    return toys.toy_page(request, "grpo", lambda t, lt: {
        "title": t["nav_toy"], "intro": t["toy_intro"], "note": lt["toy_loss_note"], "count_label": t["iterations"],
        "charts": [toys.chart("chart-p", t["p_target"], t["chart_p_desc"]),
                   toys.chart("chart-loss", t["loss"], t["chart_loss_desc"])]})
