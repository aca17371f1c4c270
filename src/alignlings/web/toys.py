"""What the toy pages (``/toy-grpo``, ``/toy-dpo``, ``/toy-ppo``) share: the run API of one kind and
the page itself.

:func:`add_run_api` puts on a router, for one run kind of :class:`alignlings.web.runs.RunManager`:
``POST /api/toy-KIND/runs`` (start; 201, 429 when the queue or the learner's share is full),
``GET /api/toy-KIND/runs`` (this kind's kept runs, newest last), ``GET /api/toy-KIND/runs/{id}`` and
``GET /api/toy-KIND/runs/{id}/events`` (server-sent events ``start``, ``point``..., then ``done`` or
``failed``, replayed from the start or after ``Last-Event-ID``). A run of another kind is a 404 there.

This module does not use postponed annotations: FastAPI reads the request body's model from the
annotation of a function defined here at run time.
"""

import asyncio
import json
from typing import Any, Callable

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from alignlings.web.checkqueue import client_key
from alignlings.web.context import ctx, lang_of, render_page
from alignlings.web.i18n import learner, ui
from alignlings.web.runs import Run

LABELS = {"grpo": "GRPO", "dpo": "DPO", "ppo": "PPO"}


def sse(index: int, event: str, data: dict) -> str:
    return f"id: {index}\nevent: {event}\ndata: {json.dumps(data)}\n\n"


def run_of(request: Request, kind: str, run_id: str) -> Run:
    """The kept run ``run_id`` if it is of ``kind``, else 404."""
    run = ctx(request).toy_runs.get(run_id)
    if run is None or run.kind != kind:
        raise HTTPException(404, f"unknown toy {LABELS[kind]} run {run_id!r}")
    return run


def event_stream(request: Request, run: Run) -> StreamingResponse:
    """Server-sent events of one run, replayed from the start (or after ``Last-Event-ID``)."""
    last = request.headers.get("last-event-id", "")
    start = int(last) + 1 if last.isdigit() else 0

    async def stream():
        i = start
        yield "retry: 1000\n\n"
        while True:
            events = run.events  # appended by the training thread; reading a prefix is safe
            while i < len(events):
                e = events[i]
                yield sse(i, e["event"], e["data"])
                i += 1
                if e["event"] in ("done", "failed"):
                    return
            await asyncio.sleep(0.05)  # Starlette cancels this generator when the client goes away

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


class ToyRunBody(BaseModel):
    """What every toy run's start request has; a kind's body adds its count (iterations or steps)."""

    model_config = ConfigDict(extra="forbid")
    seed: int = Field(default=0, ge=0, lt=2**31, description="torch.manual_seed before the models are built.")
    delay_ms: int = Field(default=40, ge=0, le=1000, description="Pause after each step, to watch it learn.")


def add_run_api(router: APIRouter, kind: str, body_model: type[ToyRunBody], count_field: str) -> dict[str, Callable]:
    """The four run routes of ``kind`` on ``router``; the request body's ``count_field`` (iterations or
    steps) is the run's length. Returns the route functions by name (start_run, list_runs, get_run,
    run_events)."""
    api, tag, label = f"/api/toy-{kind}/runs", f"toy-{kind}", LABELS[kind]

    def start_run(request: Request, body: body_model) -> dict:  # type: ignore[valid-type]
        request_body: ToyRunBody = body
        count = getattr(request_body, count_field)
        run = ctx(request).toy_runs.start(request_body.seed, count, request_body.delay_ms, owner=client_key(request),
                                          kind=kind)
        return {"id": run.id, "seed": run.seed, "iterations": run.iterations, count_field: run.iterations,
                "events": f"{api}/{run.id}/events"}

    def list_runs(request: Request) -> list[dict]:
        return [r.summary() for r in ctx(request).toy_runs.all(kind)]

    def get_run(request: Request, run_id: str) -> dict:
        return run_of(request, kind, run_id).summary()

    async def run_events(request: Request, run_id: str):
        return event_stream(request, run_of(request, kind, run_id))

    start_run.__doc__ = f"Start a toy {label} run; stream it from ``{api}/{{id}}/events``."
    list_runs.__doc__ = f"Recent toy {label} runs with their points so far (newest last)."
    get_run.__doc__ = f"One toy {label} run with its points so far."
    run_events.__doc__ = "Server-sent events of one run, replayed from the start (or after ``Last-Event-ID``)."
    router.add_api_route(api, start_run, methods=["POST"], tags=[tag], status_code=201)
    router.add_api_route(api, list_runs, methods=["GET"], tags=[tag])
    router.add_api_route(api + "/{run_id}", get_run, methods=["GET"], tags=[tag])
    router.add_api_route(api + "/{run_id}/events", run_events, methods=["GET"], tags=[tag])
    return {"start_run": start_run, "list_runs": list_runs, "get_run": get_run, "run_events": run_events}


LINKS = {"grpo": ("/toy-grpo", "toy_grpo_other"), "dpo": ("/toy-dpo", "toy_other"), "ppo": ("/toy-ppo", "toy_ppo_other")}
"""Each toy page links to the others: (href, learner string); the first link's id is other-toy, the
next ones' other-toy-KIND."""


def chart(canvas: str, caption: str, desc: str) -> dict:
    return {"id": canvas, "caption": caption, "desc": desc}


def toy_page(request: Request, kind: str, page: Callable[[dict, dict], dict]):
    """The toy page of ``kind`` (template toy.html). ``page(ui, learner)`` gives its ``title``,
    ``intro``, ``count_label`` and ``charts`` (:func:`chart`), optionally a ``note``, more ``links``
    and ``toy``: what toy_grpo.js needs beyond the GRPO defaults (API, target, labels, charts)."""
    lang = lang_of(request)
    ctx(request).toy_runs.prepare()
    t, lt = ui(lang), learner(lang)
    spec = page(t, lt)
    client: dict[str, Any] = {"lang": lang, "t": t, "runs": [r.summary() for r in ctx(request).toy_runs.all(kind)]}
    if spec.get("toy") is not None:
        client["toy"] = spec["toy"]
    others = [(k, href, key) for k, (href, key) in LINKS.items() if k != kind]
    links = [{"href": href, "id": "other-toy" if i == 0 else f"other-toy-{k}", "text": lt[key]}
             for i, (k, href, key) in enumerate(others)]
    return render_page(request, "toy.html", nav="toy", title=spec["title"], l=lt, client=client,
                       intro=spec["intro"], note=spec.get("note"), links=links + spec.get("links", []),
                       count_label=spec["count_label"], charts=spec["charts"])
