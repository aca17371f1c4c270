"""The mock interview's concept questions (issue 32 §2): at least three per track of both built-in packs, each
option explained in English and Chinese, ids unique across every question of the packs, and the numbers
they quote computed here."""
from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest

from alignlings.content import questionbank as qb
from alignlings.content.pack import load_pack

PACKS = [load_pack("dpo-grpo"), load_pack("bug-drills")]


@pytest.mark.parametrize("pack", PACKS, ids=[p.id for p in PACKS])
def test_every_track_has_three_sound_questions(pack):
    bank = qb.load_bank(pack)
    assert {t.id for t in pack.tracks} == set(bank)
    for track, questions in bank.items():
        assert len(questions) >= 3, track
        assert len({q.answer for q in questions}) > 1, track  # "always the same option" does not pass
        for q in questions:
            assert len(q.options) == 4
    assert qb.bank_problems(pack) == []


def test_at_least_21_new_questions_with_ids_unique_across_both_packs():
    ids = [q.id for pack in PACKS for qs in qb.load_bank(pack).values() for q in qs]
    assert len(ids) >= 21
    existing = [i for pack in PACKS for i in qb._pack_question_ids(pack)]
    counts = Counter(ids + existing)
    assert [i for i, n in counts.items() if n > 1] == []


def _fake_pack(tmp_path, body: str, question_ids=()):
    (tmp_path / "interview").mkdir()
    (tmp_path / "interview" / "t.toml").write_text(body, encoding="utf-8")
    (tmp_path / "texts").mkdir()
    (tmp_path / "texts" / "en.toml").write_text('[concepts]\nknown = "Known"\n', encoding="utf-8")
    spec = SimpleNamespace(name="quiz", recorded_questions=lambda ex: tuple(SimpleNamespace(id=i) for i in question_ids))
    return SimpleNamespace(parts=[], path=tmp_path, tracks=[SimpleNamespace(id="t")],
                           exercises={"ex": SimpleNamespace(kind_spec=spec, predict=())})


_OPTION = '[[question.option]]\ntext.en = "a"\ntext.zh = "甲"\nwhy.en = "because"\nwhy.zh = "因为"\n'


def test_problems_are_named(tmp_path):
    body = ('[[question]]\nid = "taken"\nanswer = 0\nconcepts = ["unknown-tag"]\nquestion.en = "q?"\n'
            + _OPTION * 2 + '[[question.option]]\ntext.en = "b"\ntext.zh = "乙"\nwhy.en = "no"\n')
    problems = qb.bank_problems(_fake_pack(tmp_path, body, question_ids=["taken"]))
    text = "\n".join(problems)
    assert "id already used by ex" in text
    assert "no question text in zh" in text
    assert "option 2 lacks its text or why in zh" in text
    assert "unknown concept 'unknown-tag'" in text


def test_a_file_for_an_unknown_track_is_named(tmp_path):
    pack = _fake_pack(tmp_path, '[[question]]\nid = "x"\nanswer = 0\nquestion.en = "q"\nquestion.zh = "问"\n' + _OPTION * 3)
    (tmp_path / "interview" / "t.toml").rename(tmp_path / "interview" / "nope.toml")
    assert any("no track 'nope'" in p for p in qb.bank_problems(pack))


def _question(qid: str):
    for pack in PACKS:
        for qs in qb.load_bank(pack).values():
            for q in qs:
                if q.id == qid:
                    return q
    raise KeyError(qid)


def test_quoted_numbers():
    """The numbers the questions quote, computed."""
    import math

    # clip-higher: a token at pi_old = 0.01 can reach 0.012 at eps = 0.2; log 0.8 and log 1.2
    assert round(0.01 * 1.2, 3) == 0.012 and (round(math.log(0.8), 2), round(math.log(1.2), 2)) == (-0.22, 0.18)
    why = " ".join(o.why["en"] for o in _question("iv-dapo-clip-higher").options)
    assert "log 0.8 = −0.22, log 1.2 = 0.18" in why
    # accumulation: 1/(4 * 100) and 1/(4 * 700) instead of 1/1000
    right = _question("iv-accumulation-token-mean")
    assert "1/400" in right.options[right.answer].text["en"] and "1/2800" in right.options[right.answer].text["en"]
    # RLOO: k/(k - 1)
    assert f"{8 / 7:.2f}" in " ".join(o.why["en"] for o in _question("iv-rloo-leave-one-out").options)
    # the critic trained on the advantages: the numbers tests/test_content_exact.py measures on toy PPO
    why = " ".join(o.why["en"] for o in _question("iv-solved-is-no-proof").options)
    assert "0.33 where the λ-return is 0.68" in why


def test_equal_rewards_give_zero_advantages():
    torch = pytest.importorskip("torch")
    rewards = torch.ones(8)
    advantages = (rewards - rewards.mean()) / (rewards.std() + 1e-4)  # TRL 1.16, scale_rewards="group"
    assert advantages.abs().max().item() == 0.0


def test_dev_check_reports_a_broken_interview_question_at_its_line(tmp_path):
    import shutil

    from alignlings.content import packlint
    from alignlings.content.pack import builtin_pack_path

    folder = tmp_path / "bug-drills"
    shutil.copytree(builtin_pack_path().parent / "bug-drills", folder)
    path = folder / "interview" / "spot-the-bug.toml"
    text = path.read_text(encoding="utf-8")
    qid = qb.read_quiz_questions(path)[1].id
    start = text.index(f'id = "{qid}"')
    end = text.index("why.zh = ", start)
    path.write_text(text[:end] + "# " + text[end:], encoding="utf-8")  # the first option's zh why is gone
    problems = [p for p in packlint.lint_pack(load_pack(folder)) if p.path == path]
    line = text[:start].count("\n") + 1
    assert [(p.line, qid in p.message, "zh" in p.message) for p in problems] == [(line, True, True)], problems
