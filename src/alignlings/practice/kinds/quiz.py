"""The concept quiz (``kind = "quiz"``): questions from quiz.toml answered by choosing an option."""

from __future__ import annotations

from alignlings.practice.kinds import Kind, register, skeletons


class Quiz(Kind):
    name = "quiz"
    label = {"en": "quiz", "zh": "测验"}
    answered_by_choice = True
    on_quiz_page = True
    web_page = "quiz"  # web/quiz.py
    template = "quiz.html"

    def dev_check(self, ex, grader):
        return [], []  # its texts and questions are checked by practice.devcheck.check_texts

    def skeleton(self, exercise_id):
        return skeletons.quiz(exercise_id)


QUIZ = register(Quiz())
