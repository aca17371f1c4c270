"""Bug or not (``kind = "bug-or-not"``): a snippet from bugornot.toml, asked as two quiz questions
(bug or expected, then why); ``dev check``: ``practice.bugdrill.check_bug_or_not``."""

from __future__ import annotations

from alignlings.practice.kinds import Kind, register, skeletons


class BugOrNot(Kind):
    name = "bug-or-not"
    label = {"en": "bug or not", "zh": "是不是 bug"}
    answered_by_choice = True
    questions_file = "bugornot.toml"
    web_page = "bug-or-not"  # web/quiz.py, the quiz page with only this drill
    template = "quiz.html"

    def questions(self, ex):
        from alignlings.practice.bugdrill import bug_or_not_questions

        return bug_or_not_questions(ex)  # bug or expected, then why

    def dev_check(self, ex, grader):
        from alignlings.practice import bugdrill

        return bugdrill.check_bug_or_not(ex)

    def skeleton(self, exercise_id):
        return skeletons.bug_or_not(exercise_id)


BUG_OR_NOT = register(BugOrNot())
