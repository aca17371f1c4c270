"""The concept quiz (``kind = "quiz"``): questions from quiz.toml answered by choosing an option.
In spaced review each question is an item ``quiz/QUESTION``, asked as in the quiz."""

from __future__ import annotations

from typing import Any

from alignlings.content.kinds import Kind, ReviewItemKind, register, skeletons


class Quiz(Kind):
    # a bug-or-not drill's questions too; judged at once, nothing runs
    review_item_kinds = (ReviewItemKind("quiz", "question", answer="choice", runs_code=False),)
    name = "quiz"
    label = {"en": "quiz", "zh": "测验"}
    answered_by_choice = True
    on_quiz_page = True
    review_needs_grader = False

    def dev_check(self, ex, grader):
        return [], []  # its texts and questions are checked by practice.devcheck.check_texts

    def skeleton(self, exercise_id):
        return skeletons.quiz(exercise_id)

    def question_tags(self, rv, ex) -> dict[str, tuple[str, ...]]:
        return rv.question_concepts(ex)

    def review_items(self, rv, ex):
        tags = self.question_tags(rv, ex)
        return [rv.Item(f"quiz/{q.id}", "quiz", ex.pack, ex.key, tags.get(q.id, ()), question=q.id) for q in ex.quiz]

    def review_prompt(self, rv, review, item, base, lang):
        q = next(q for q in review.pack.get(item.exercise).quiz if q.id == item.question)
        return rv.QuizPrompt(**base, question=q.question.get(lang, ""), options=[o.text.get(lang, "") for o in q.options])

    def review_check(self, rv, review, item, answer, grader, lang) -> dict:
        q = next(q for q in review.pack.get(item.exercise).quiz if q.id == item.question)
        return check_choice(q, answer, lang)

    def question_ids(self, ex):
        return [q.id for q in ex.quiz]

    def practise_url(self, ex):
        return "/quiz"


def check_choice(q: Any, answer: Any, lang: str) -> dict:
    """A chosen option judged: ``correct``, ``expected`` (the right index), the chosen option's
    ``feedback`` and every option's text, why and whether it is right (quiz and predict questions)."""
    if isinstance(answer, bool) or not isinstance(answer, int):
        raise ValueError(f"answer: expected an option index, got {type(answer).__name__} {str(answer)[:60]!r}")
    if not 0 <= answer < len(q.options):
        raise ValueError(f"answer: expected an option index 0..{len(q.options) - 1}, got {answer}")
    return {"correct": answer == q.answer, "expected": q.answer,
            "feedback": q.options[answer].why.get(lang, ""),
            "options": [{"text": o.text.get(lang, ""), "why": o.why.get(lang, ""), "correct": i == q.answer}
                        for i, o in enumerate(q.options)]}


QUIZ = register(Quiz())
