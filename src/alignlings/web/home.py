"""Home: the pack's exercises with progress, the next one to do, the drills and the toy run."""

from __future__ import annotations

from fastapi import APIRouter, Request

from alignlings.web.app import ctx, lang_of, render_page
from alignlings.web.progress import rows

router = APIRouter()


@router.get("/", include_in_schema=False)
def home(request: Request):
    lang = lang_of(request)
    items = rows(request)
    nxt = next((r for r in items if not r["solved"]), None)
    pack = ctx(request).pack
    snippets = [{"id": ex.id, "title": ex.title.get(lang, ex.id)} for ex in pack if ex.cloze]
    done = sum(r["solved"] for r in items)
    return render_page(request, "home.html", nav="home", title=pack.title.get(lang, pack.id), rows=items,
                       next=nxt, snippets=snippets, done=done)
