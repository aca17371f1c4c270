"""docs/builtin-packs.md lists the built-in packs' track ids and concept tags as the packs define
them (issue 34): regenerate it with `python scripts/builtin_packs_doc.py` when a pack changes."""

from __future__ import annotations

import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_builtin_packs_doc_is_what_the_packs_say():
    render = runpy.run_path(str(ROOT / "scripts" / "builtin_packs_doc.py"))["render"]
    text = render()
    assert (ROOT / "docs" / "builtin-packs.md").read_text(encoding="utf-8") == text, \
        "docs/builtin-packs.md is stale: run python scripts/builtin_packs_doc.py"
    from alignlings.content.pack import load_pack
    from alignlings.practice.review import concept_names

    course = load_pack()
    for track in course.tracks:  # every track id and tag is there (the render is not empty by mistake)
        assert f"| `{track.id}` |" in text
    for tag in concept_names(course, "en"):
        assert f"| `{tag}` |" in text
