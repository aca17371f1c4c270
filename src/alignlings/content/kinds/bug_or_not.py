"""Bug or not (``kind = "bug-or-not"``): a snippet from bugornot.toml, asked as two quiz questions
(bug or expected, then why); ``dev check``: ``practice.bugdrill.check_bug_or_not``. In spaced review
its two questions are quiz items (``quiz/DRILL:verdict``, ``quiz/DRILL:reason``) sharing the drill's tags."""

from __future__ import annotations

from alignlings.content.kinds import register, skeletons
from alignlings.content.kinds.quiz import Quiz


class BugOrNot(Quiz):
    name = "bug-or-not"
    label = {"en": "bug or not", "zh": "是不是 bug"}
    answered_by_choice = True
    on_quiz_page = False  # its own page, not the concept quiz
    questions_file = "bugornot.toml"

    def questions(self, ex):
        from alignlings.content.bugdrill import bug_or_not_questions

        return bug_or_not_questions(ex)  # bug or expected, then why

    def text_problems(self, ex):
        return []  # every text of bugornot.toml is checked, at its own line, by bugdrill.check_bug_or_not

    def dev_check(self, ex, grader):
        from alignlings.content import bugdrill

        return bugdrill.check_bug_or_not(ex)

    def skeleton(self, exercise_id):
        return skeletons.bug_or_not(exercise_id)

    def question_tags(self, rv, ex):
        tags = rv.drill_concepts(ex)
        return {q.id: tags for q in ex.quiz} if tags else {}

    def practise_url(self, ex):
        return f"/exercises/{ex.key}"  # its own page (web/quiz.py with only it)


BUG_OR_NOT = register(BugOrNot())
