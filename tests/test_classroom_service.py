"""Teacher actions through one service (issue 30 §1): ``practice.classroom.Classroom`` decides what
a teacher may do to the class store; the web app's teacher routes call it and never the store."""

from __future__ import annotations

import ast
import inspect

import pytest

from alignlings.content.pack import load_pack
from alignlings.practice.classroom import Classroom, due_iso
from alignlings.practice.session import UsageError
from alignlings.practice.store import ProgressStore

PACK = load_pack()
LOCKED = "dpo-grpo/reward-models"  # requires dpo-grpo/foundations


@pytest.fixture()
def room(tmp_path):
    store = ProgressStore(tmp_path / "c.sqlite3")
    yield Classroom(store, PACK)
    store.close()


def test_the_plan_lock_and_assignments(room):
    assert room.lock(LOCKED, True) == LOCKED
    assert {r["key"]: r["locked"] for r in room.track_rows()}[LOCKED] is True
    first = next(t for t in PACK.tracks if not t.requires)
    with pytest.raises(UsageError, match="requires no other track") as err:
        room.lock(first.key, True)
    assert err.value.argument == "track" and not err.value.missing
    with pytest.raises(UsageError, match="track: expected one of"):
        room.lock("nope", True)
    assert room.lock(LOCKED, False) == LOCKED and not any(r["locked"] for r in room.track_rows())
    given = room.add_assignment("Week 1", ["dpo-loss"], "2026-03-09")
    assert given["due"].startswith("2026-03-09T23:59:59") and due_iso(" 2026-03-09 ") == "2026-03-09T23:59:59+00:00"
    assert [a["id"] for a in room.assignment_reports()] == [given["id"]]
    with pytest.raises(UsageError, match=r"exercises\[1\]") as err:
        room.add_assignment("Week 2", ["dpo-loss", "no-such-exercise"], "2026-03-09", lang="zh")
    assert err.value.argument == "exercises[1]"
    room.remove_assignment(given["id"])
    with pytest.raises(UsageError, match="no assignment") as err:
        room.remove_assignment(given["id"])
    assert err.value.missing


def test_learners_rename_recovery_export_merge_remove(room):
    ann, ann_token = room.store.add_learner("Ann")
    bo, _ = room.store.add_learner("Bo")
    room.rename(ann, "Ann L.")
    name, code = room.new_recovery_code(ann)
    assert name == "Ann L." and code
    assert room.export_learner(ann)["format"] == "alignlings-progress"
    for action in (lambda: room.rename("ghost", "X"), lambda: room.new_recovery_code("ghost"),
                   lambda: room.export_learner("ghost")):
        with pytest.raises(UsageError, match="no learner") as err:
            action()
        assert err.value.missing
    with pytest.raises(UsageError) as err:  # a bad name: 422, not 404
        room.rename(ann, "")
    assert not err.value.missing
    room.merge(bo, ann)
    exported = room.remove(ann, keep_history=True)
    assert exported["format"] == "alignlings-progress"
    assert room.export_learner(ann)  # a removed learner's history can still be downloaded


def test_teacher_routes_call_the_classroom_not_the_store():
    """Every teacher POST route (lock, assignments, rename, merge, remove, recovery, interviews) and
    the learner export reach the store only through ``Classroom``."""
    from alignlings.web import classroom, classroom_interview

    routes = [classroom.rename_learner, classroom.merge_learner, classroom.remove_learner,
              classroom.new_recovery_code, classroom.export_learner, classroom.lock_track,
              classroom.add_assignment, classroom.remove_assignment, classroom.assignments_json,
              classroom_interview.add, classroom_interview.remove, classroom_interview.results_json]
    for fn in routes:
        tree = ast.parse(inspect.getsource(fn).lstrip())
        touched = [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "store"]
        assert not touched, f"{fn.__module__}.{fn.__name__} calls the store directly"
        assert "classroom(" in inspect.getsource(fn), fn.__name__
