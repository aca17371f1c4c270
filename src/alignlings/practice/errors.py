"""What a learner's request can be refused with (``Practice`` raises them; the CLI turns them into
usage errors, the web app into 403, 404 or 422): a leaf module, so the modules the session is made
of (``practice.interview``) name them without importing the session."""

from __future__ import annotations


class UsageError(ValueError):
    """A request this course cannot serve: ``argument`` names what was wrong; ``missing`` when the
    thing asked for does not exist (the web app answers 404, else 422)."""

    def __init__(self, argument: str, message: str, *, missing: bool = False):
        super().__init__(message)
        self.argument, self.message, self.missing = argument, message, missing


class Locked(UsageError):
    """Refused because the exercise's track is locked for this learner (the teacher's plan): the
    message is the reason, written for the learner (the web app answers 403 with it alone)."""

    def __init__(self, reason: str):
        super().__init__("ID", reason)
