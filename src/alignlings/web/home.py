"""Home: the exercises grouped by pack and track with progress, the next one to do, the drills and the toy run."""

from __future__ import annotations

from fastapi import APIRouter, Request

from alignlings import i18n
from alignlings.web.context import ctx, lang_of, practice, render_page

router = APIRouter()

# strings of this page only (the shared ones live in alignlings.web.i18n)
AFTER = i18n.texts("web.home.after")  # strings: locales/{en,zh}.toml [web.home]


def groups(request: Request) -> list[dict]:
    """``[{pack, title, tracks: [{id, title, requires, rows}]}]``: packs in course order, tracks in
    order; a row is one exercise with its progress (the store keys progress by pack and id)."""
    lang = lang_of(request)
    pack = ctx(request).pack
    progress = practice(request).summary().exercises
    from alignlings.web.classroom import track_locks_for

    locks = track_locks_for(request)  # a class: tracks the teacher locked, and why (empty otherwise)
    out = []
    for part in pack.packs:
        tracks = []
        for track in (t for t in pack.tracks if t.pack == part.id):
            rows = []
            for key in track.exercises:
                ex = pack.exercises[key]
                row = progress[key]
                rows.append({"id": key, "title": ex.title.get(lang, ex.id), "kind": ex.kind, "kind_label": ex.kind_spec.label.get(lang, ex.kind), "level": ex.level,
                             "solved": row.solved, "attempts": row.attempts, "hints": row.hints,
                             "revealed": row.revealed, "levels": row.levels})
            needs = [pack.track(r).title.get(lang, r) for r in track.requires]
            title = part.title if track.implicit and len(part.tracks) == 1 else track.title
            tracks.append({"id": track.key, "title": title.get(lang, track.id), "rows": rows,
                           "requires": AFTER[lang].format(tracks=", ".join(needs)) if needs else "",
                           "locked": locks.get(track.key, "")})
        out.append({"pack": part.id, "title": part.title.get(lang, part.id), "tracks": tracks})
    return out


@router.get("/", include_in_schema=False)
def home(request: Request):
    lang = lang_of(request)
    grouped = groups(request)
    items = [r for g in grouped for t in g["tracks"] for r in t["rows"]]
    nxt = next((r for r in items if not r["solved"]), None)
    pack = ctx(request).pack
    snippets = [{"id": ex.key, "title": ex.title.get(lang, ex.id)} for ex in pack if ex.cloze]
    done = sum(r["solved"] for r in items)
    return render_page(request, "home.html", nav="home", title=pack.title.get(lang, pack.id), rows=items,
                       groups=grouped, next=nxt, snippets=snippets, done=done)
