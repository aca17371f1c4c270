"""Pictures for exercises (``alignlings.content.figures``): ``GET /figures/{name}.svg?lang=``.

The SVG is rendered once per language and cached (memory and disk); the exercise page shows each
of its pictures under the statement, with the same content as text in a <details> beside it.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import PlainTextResponse, Response

from alignlings.content import figures
from alignlings.web.context import lang_of

router = APIRouter()


@router.get("/figures/{name}.svg", include_in_schema=False)
def figure_svg(request: Request, name: str, layout: str = "wide") -> Response:
    """The picture; ``layout=narrow``: its panels stacked, for a phone."""
    if name not in figures.NAMES:
        raise HTTPException(404, f"no picture {name!r}; expected one of {figures.NAMES}")
    if layout not in ("wide", "narrow"):
        raise HTTPException(422, f"layout: expected 'wide' or 'narrow', got {layout!r}")
    return Response(figures.svg(name, lang_of(request), narrow=layout == "narrow"), media_type="image/svg+xml",
                    headers={"Cache-Control": "public, max-age=3600"})


@router.get("/figures/{name}.txt", include_in_schema=False)
def figure_text(request: Request, name: str) -> PlainTextResponse:
    if name not in figures.NAMES:
        raise HTTPException(404, f"no picture {name!r}; expected one of {figures.NAMES}")
    return PlainTextResponse(figures.text(name, lang_of(request)))


def for_page(exercise_id: str, lang: str) -> list[dict]:
    """The pictures of an exercise's page: ``[{name, src, narrow, title, caption, text}]``."""
    return [{"name": n, "src": f"/figures/{n}.svg?lang={lang}", "narrow": f"/figures/{n}.svg?lang={lang}&layout=narrow", "title": figures.title(n, lang),
             "caption": figures.caption(n, lang), "text": figures.text(n, lang)}
            for n in figures.for_exercise(exercise_id)]
