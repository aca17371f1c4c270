"""The toy PPO page: train the toy-ppo capstone's policy and critic in the server and stream its curves.

On the toy pages' shared run machinery and routes (``alignlings.web.runs``, ``alignlings.web.toys``).
``POST /api/toy-ppo/runs`` starts :func:`alignlings.toy_ppo.run_toy_ppo` (the library's own code, not
learner code) in a thread; ``GET /api/toy-ppo/runs/{id}/events`` streams server-sent events:
``start``, one ``point`` per iteration (``p_target`` = P("aaaa" | <bos>), ``score`` = the sampled
batch's mean score, ``policy_loss``, ``value_loss``, ``kl``, ``clipfrac``; ``loss`` = the policy
loss), then ``done`` (with ``score_final``, the mean score of the last five batches) or ``failed``.

The page draws what the capstone's stated result is about, P("aaaa") against its target 0.75 and the
mean score against 0.9, and the two losses (policy solid, value dashed), one colour per seed.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import Field

from alignlings.web import toys

router = APIRouter()

P_TARGET = 0.75
"""The capstone's goal for P("aaaa" | <bos>) (packs/dpo-grpo/toy-ppo)."""
SCORE_TARGET = 0.9
"""The capstone's goal for the mean score of the last five batches."""


class PPORunBody(toys.ToyRunBody):
    iterations: int = Field(default=40, ge=1, le=200, description="Sample-then-update rounds (the capstone: 40).")


_routes = toys.add_run_api(router, "ppo", PPORunBody, "iterations")
start_run, list_runs, get_run, run_events = (_routes[k] for k in ("start_run", "list_runs", "get_run", "run_events"))


def _client(t: dict, lt: dict) -> dict:
    return {"api": "/api/toy-ppo", "target": P_TARGET, "done": lt["ppo_run_done"], "x_label": t["iteration"],
            "charts": [
                {"canvas": "chart-p", "keys": [["p_target", False]], "range": [0, 1], "target": P_TARGET,
                 "target_label": lt["toy_ppo_p_target"]},
                {"canvas": "chart-score", "keys": [["score", False]], "range": [0, 1], "target": SCORE_TARGET,
                 "target_label": lt["toy_ppo_score_target"]},
                {"canvas": "chart-loss", "keys": [["policy_loss", False], ["value_loss", True]], "range": None},
            ]}


@router.get("/toy-ppo", include_in_schema=False)
def toy_page(request: Request):
    return toys.toy_page(request, "ppo", lambda t, lt: {
        "title": lt["nav_toy_ppo"], "intro": lt["toy_ppo_intro"], "count_label": t["iterations"],
        "links": [{"href": "/exercises/toy-ppo", "id": "toy-ppo-exercise", "text": lt["toy_ppo_exercise"]}],
        "charts": [toys.chart("chart-p", lt["toy_ppo_p"], lt["ppo_chart_p_desc"]),
                   toys.chart("chart-score", lt["toy_ppo_score"], lt["ppo_chart_score_desc"]),
                   toys.chart("chart-loss", lt["toy_ppo_losses"], lt["ppo_chart_loss_desc"])],
        "toy": _client(t, lt)})
