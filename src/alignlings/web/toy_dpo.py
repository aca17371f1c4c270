"""The toy DPO page: train the toy-dpo exercise's one-layer GPT-2 in the server and stream its curves.

The twin of the toy GRPO page (``alignlings.web.toy_grpo``), on the same run machinery
(``alignlings.web.runs.RunManager``: one run trains at a time, the others wait, each run's events
are kept for its stream) and the same routes (``alignlings.web.toys``). ``POST /api/toy-dpo/runs``
starts :func:`alignlings.toy_dpo.run_toy_dpo` (the library's own code, not learner code) in a thread;
``GET /api/toy-dpo/runs/{id}/events`` streams server-sent events: ``start``, one ``point`` per
optimizer step (``iteration`` = the step, ``p_target`` = P("a" | <bos>), ``loss`` = the DPO loss),
then ``done`` (or ``failed``). The page draws P("a") with the exercise's target 0.9 and the loss (it
starts at log 2), one curve per seed.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import Field

from alignlings.web import toys

router = APIRouter()

TARGET = 0.9
"""The toy-dpo exercise's goal: P("a") > 0.9 (packs/dpo-grpo/toy-dpo)."""


class DPORunBody(toys.ToyRunBody):
    steps: int = Field(default=40, ge=1, le=200, description="Adam steps on the 9 pairs (the exercise: 40).")


def _dpo_run(request: Request, run_id: str):
    return toys.run_of(request, "dpo", run_id)


_routes = toys.add_run_api(router, "dpo", DPORunBody, "steps")
start_run, list_runs, get_run, run_events = (_routes[k] for k in ("start_run", "list_runs", "get_run", "run_events"))


@router.get("/toy-dpo", include_in_schema=False)
def toy_page(request: Request):
    return toys.toy_page(request, "dpo", lambda t, lt: {
        "title": lt["nav_toy_dpo"], "intro": lt["toy_dpo_intro"], "count_label": lt["steps"],
        "charts": [toys.chart("chart-p", t["p_target"], lt["dpo_chart_p_desc"]),
                   toys.chart("chart-loss", t["loss"], lt["dpo_chart_loss_desc"])],
        "toy": {"api": "/api/toy-dpo", "target": TARGET, "target_label": lt["toy_dpo_target"],
                "done": lt["dpo_run_done"], "x_label": lt["step"], "count_key": "steps"}})
