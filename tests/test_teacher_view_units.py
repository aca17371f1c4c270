"""The teacher view's words and numbers (issue 34): durations in sensible units in both languages,
plural counts, and "last submission" as the learner's last code (a quiz round has none)."""

from __future__ import annotations

import pytest

from alignlings import i18n
from alignlings.practice import report
from alignlings.content.pack import load_pack
from alignlings.practice.store import ProgressStore
from alignlings.web.classroom import _duration, plural

EN, ZH = (i18n.lang_table("web.classroom")[lang] for lang in ("en", "zh"))


@pytest.mark.parametrize("seconds, en, zh", [
    (21, "21 s", "21 秒"), (0, "0 s", "0 秒"), (125, "2 min 05 s", "2 分 05 秒"), (720, "12 min", "12 分钟"),
    (3900, "1 h 05 min", "1 小时 05 分钟"), (None, "", ""),
])
def test_durations_read_right_in_both_languages(seconds, en, zh):
    assert _duration(seconds, EN) == en and _duration(seconds, ZH) == zh


def test_counts_are_singular_for_one():
    assert plural(EN, "times", 1) == "1 time" and plural(EN, "times", 3) == "3 times"
    assert plural(EN, "n_exercises", 1) == "1 exercise" and plural(EN, "n_exercises", 2) == "2 exercises"
    assert plural(ZH, "n_exercises", 1) == "1 道练习" and plural(ZH, "times", 2) == "2 次"


def test_the_last_submission_is_the_last_code_not_a_quiz_round(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path))
    with ProgressStore(tmp_path / "p.db") as store:
        lid, _ = store.add_learner("Ann")
        ann = store.for_learner(lid)
        ann.record_attempt("dpo-loss", {"passed": False}, code="def dpo_loss(): return 1")
        ann.record_attempt("concepts", {"passed": True}, code="")  # a quiz round closes: no code
        (row,) = report.learner_rows(store, load_pack())
        assert row["last_submission"]["exercise"] == "dpo-loss"
        assert row["last_submission"]["code"] == "def dpo_loss(): return 1"
