"""The teacher page and the class JSON compute the class report once per request (issue 30 §3):
one ``Practice.class_report`` (class summaries read once per pack) and one read of the history
for the who-is-stuck-where report, however many parts of the page show them."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from alignlings.practice import report  # noqa: E402
from alignlings.practice.store import sqlite as store_sqlite  # noqa: E402
from test_classroom_identity import CODE, join, make_app, teacher  # noqa: E402


@pytest.mark.parametrize("path", ["/teacher?lang=en", "/api/teacher/class?lang=en"])
def test_one_request_computes_the_class_report_once(tmp_path, monkeypatch, path):
    app = make_app(tmp_path / "c.sqlite3", class_code=CODE)
    ann, _ = join(app, "Ann")
    ann.post("/api/exercises/dpo-loss/hint")
    t = teacher(app)
    summaries, reads = [], []
    original_summaries, original_history = store_sqlite.ProgressStore.class_summaries, report._history

    def counting_summaries(self, pack="dpo-grpo"):
        summaries.append(pack)
        return original_summaries(self, pack)

    def counting_history(store):
        reads.append(store)
        return original_history(store)

    monkeypatch.setattr(store_sqlite.ProgressStore, "class_summaries", counting_summaries)
    monkeypatch.setattr(report, "_history", counting_history)
    r = t.get(path)
    assert r.status_code == 200, r.text
    packs = [p.id for p in app.state.ctx.pack.packs]
    assert sorted(summaries) == sorted(packs), summaries  # one class report: each pack's summaries once
    assert len(reads) == 1  # one read of the history for the who-is-stuck-where report
    app.state.ctx.store.close()
