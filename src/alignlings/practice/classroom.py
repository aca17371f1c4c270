"""The teacher's actions on a class, in one service: lock or open a track, give and remove
assignments, rename, merge and remove learners, issue a recovery code, export a learner, and the
reports of assignments. The web app's teacher routes authenticate the teacher and render; what is
allowed, and how the store is asked, is decided here (the teacher's counterpart of ``Practice``,
the learner's one gate). A request this class cannot serve raises ``UsageError`` (``missing`` for
a learner, track or assignment that does not exist), its message written for the teacher.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from alignlings import i18n
from alignlings.content.pack import Pack, PackError
from alignlings.practice.session import UsageError


def due_iso(value: str) -> str:
    """``due`` as the store keeps it: a date alone is the end of that day (UTC)."""
    value = value.strip()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        value += "T23:59:59+00:00"
    return value


class Classroom:
    """A class's teacher actions on ``store`` (the class store, all learners) for ``course``."""

    def __init__(self, store: Any, course: Pack):
        self.store, self.course = store, course

    @staticmethod
    def _store(argument: str, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """A store call, its ValueError (a bad name, no such learner) as a ``UsageError``."""
        try:
            return fn(*args, **kw)
        except ValueError as exc:
            raise UsageError(argument, str(exc), missing="no learner" in str(exc)) from None

    def _known_learner(self, learner: str, *, removed_too: bool = False) -> dict | None:
        info = self._store("learner", self.store.learner_info, learner)
        if info is None and not (removed_too and any(r["id"] == learner for r in self.store.learners(removed=True))):
            raise UsageError("learner", f"learner: no learner {learner!r} in the class", missing=True)
        return info

    # -- learners ------------------------------------------------------------------------------------
    def rename(self, learner: str, name: str) -> dict:
        return self._store("name", self.store.rename_learner, learner, name)

    def merge(self, learner: str, into: str) -> dict:
        """``learner``'s history moves to ``into``; returns the rows moved per table."""
        return self._store("into", self.store.merge_learners, into, learner)

    def remove(self, learner: str, *, keep_history: bool) -> dict:
        """Take ``learner`` off the class list (their rows kept, or deleted); returns their export,
        taken before anything changed."""
        return self._store("learner", self.store.remove_learner, learner, keep_history=keep_history)

    def new_recovery_code(self, learner: str) -> tuple[str, str]:
        """(the learner's name, a new recovery code: the old one stops working)."""
        info = self._known_learner(learner)
        assert info is not None
        return info["name"], self._store("learner", self.store.issue_recovery_code, learner)

    def export_learner(self, learner: str) -> dict:
        """One learner's whole history (removed learners' too), as ``progress --export`` writes it."""
        self._known_learner(learner, removed_too=True)
        return self.store.for_learner(learner).export()

    # -- the plan: locked tracks and assignments ----------------------------------------------------
    def track_rows(self, lang: str = "en") -> list[dict]:
        """Every track of the course with ``key``, ``title``, ``requires`` (titles) and ``locked``."""
        locked = self.store.locked_tracks()
        course = self.course
        return [{"key": t.key, "title": t.title.get(lang) or t.title.get("en", t.id), "locked": t.key in locked,
                 "requires": [course.track(r).title.get(lang) or course.track(r).key for r in t.requires]}
                for t in course.tracks]

    def lock(self, track_name: str, locked: bool) -> str:
        """Lock a track until each learner solved the tracks it requires (or open it); its key."""
        try:
            track = self.course.track(track_name)
        except PackError:
            raise UsageError("track", f"track: expected one of {', '.join(t.key for t in self.course.tracks)}, "
                                      f"got {track_name!r}") from None
        if locked and not track.requires:
            raise UsageError("track", f"track: {track.key!r} requires no other track, so there is nothing to wait for")
        self._store("track", self.store.lock_track, track.key, locked)
        return track.key

    def add_assignment(self, title: str, exercises: list[str], due: str, *, lang: str = "en") -> dict:
        """A set of exercises (names or keys) due at ``due`` (ISO 8601; a date alone: its end, UTC)."""
        keys = []
        for i, name in enumerate(exercises):
            try:
                keys.append(self.course.get(name).key)
            except PackError as exc:
                raise UsageError(f"exercises[{i}]", f"exercises[{i}]: "
                                 f"{i18n.reword('practice.pack_errors', str(exc), lang)}") from None
        return self._store("assignment", self.store.add_assignment, title, keys, due_iso(due))

    def _assignment(self, assignment: str) -> dict:
        found = self.store.assignment(assignment)
        if found is None:
            raise UsageError("assignment", f"assignment: no assignment {assignment!r}", missing=True)
        return found

    def remove_assignment(self, assignment: str) -> None:
        """Delete an assignment (the learners' work on its exercises stays)."""
        self._assignment(assignment)
        self.store.remove_assignment(assignment)

    def assignment_report(self, assignment: str) -> dict:
        """An assignment with ``learners`` (``practice.report.assignment_rows``) and ``finished_on_time``."""
        from alignlings.practice import report

        found = self._assignment(assignment)
        rows = report.assignment_rows(self.store, self.course, found)
        return {**found, "learners": rows, "finished_on_time": sum(r["on_time"] for r in rows)}

    def assignment_reports(self) -> list[dict]:
        return [self.assignment_report(a["id"]) for a in self.store.assignments()]

    # -- class interviews (``practice.interview``) ------------------------------------------------------
    def add_interview(self, *, title: str, due: str, minutes: int, seed: int | None = None, track: str | None = None,
                      items: int | None = None, level: int | None = None) -> dict:
        """Give the class an interview: every learner who starts it draws the same items."""
        from alignlings.practice import interview as iv

        try:
            row = iv.new_class_interview(self.course, title=title, seed=seed, minutes=minutes, track=track,
                                         items=items, level=level, due=due_iso(due))
        except ValueError as exc:
            raise UsageError("interview", str(exc)) from None
        return self._store("interview", self.store.add_class_interview, row)

    def remove_interview(self, interview: str) -> None:
        """Forget a class interview (what learners did stays in their history)."""
        self._store("interview", self.store.remove_class_interview, interview)

    def interview_results(self, interview: str, lang: str = "en") -> dict:
        """A class interview with each learner's result and the per-item summary."""
        from alignlings.practice import interview as iv

        found = next((a for a in self.store.class_interviews() if a["id"] == interview), None)
        if found is None:
            raise UsageError("interview", f"interview: no class interview {interview!r}", missing=True)
        return iv.class_results(self.store, self.course, found, lang)

    def interviews(self, lang: str = "en") -> list[dict]:
        return [self.interview_results(a["id"], lang) for a in self.store.class_interviews()]

    # -- reports --------------------------------------------------------------------------------------
    def report(self, lang: str = "en", pack_id: str | None = None, track: str | None = None) -> dict:
        """Who is stuck where: per learner and per exercise (``practice.report``), one read of the history."""
        from alignlings.practice import report

        return report.rows(self.store, self.course, lang=lang, pack=pack_id, track=track)
