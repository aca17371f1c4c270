"""The spot-the-bug drill (``kind = "bug"``): the learner fixes buggy.py, graded as a file; ``dev
check`` proves buggy.py fails, the fix passes and each known wrong fix is caught
(``practice.bugdrill.check_bug_drill``). In spaced review a fixed drill is an item ``bug/DRILL``:
the buggy file again, graded as a whole file."""

from __future__ import annotations

from alignlings.content.kinds import Kind, ReviewItemKind, register, skeletons


class Bug(Kind):
    review_item_kinds = (ReviewItemKind("bug", "exercise", answer="file"),)  # the whole fixed file
    name = "bug"
    label = {"en": "spot the bug", "zh": "找 bug"}
    graded_as_file = True
    starts_from_buggy_file = True

    def learner_file(self, ex, lang):
        return ex.buggy_source

    def solution_file(self, ex, lang):
        return ex.solution_source

    def questions(self, ex):
        return ()

    def trusted_variants(self, ex):
        from alignlings.content.bugdrill import trusted_variants

        return trusted_variants(ex)  # the known wrong fixes and buggy.py itself

    def annotate(self, ex, trusted, learner, code, verdict, lang, names):
        """Which lines changed, what still fails, the wrong fix it matches, the story."""
        from alignlings.content.bugdrill import annotate

        annotate(ex, trusted, learner, code, verdict, lang, names)

    def dev_check(self, ex, grader):
        from alignlings.content import bugdrill

        return bugdrill.check_bug_drill(ex, grader)

    def skeleton(self, exercise_id):
        return skeletons.bug(exercise_id)

    def review_items(self, rv, ex):
        return [rv.Item(f"bug/{ex.id}", "bug", ex.pack, ex.key, rv.drill_concepts(ex))]

    def review_prompt(self, rv, review, item, base, lang):
        from alignlings.content import bugdrill

        ex = review.pack.get(item.exercise)
        return rv.BugPrompt(**base, source=ex.buggy_source, statement=ex.texts(lang).statement,
                            hint=bugdrill.where(ex, lang))

    def review_check(self, rv, review, item, answer, grader, lang):
        return rv.check_bug(review.pack.get(item.exercise), answer, grader, lang)

    def review_withholds(self, item):
        return True  # the fix would solve the drill


BUG = register(Bug())
