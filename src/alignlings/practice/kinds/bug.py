"""The spot-the-bug drill (``kind = "bug"``): the learner fixes buggy.py, graded as a file; ``dev
check`` proves buggy.py fails, the fix passes and each known wrong fix is caught
(``practice.bugdrill.check_bug_drill``)."""

from __future__ import annotations

from alignlings.practice.kinds import Kind, register


class Bug(Kind):
    name = "bug"
    label = {"en": "spot the bug", "zh": "找 bug"}
    graded_as_file = True
    starts_from_buggy_file = True
    web_page = "bug"  # web/bugdrill.py
    template = "bug.html"
    cli_wrote = "wrote_bug"

    def dev_check(self, ex, grader):
        from alignlings.practice import bugdrill

        return bugdrill.check_bug_drill(ex, grader)


BUG = register(Bug())
