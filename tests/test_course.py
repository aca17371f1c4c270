"""A course: the built-in pack plus a teacher's, loaded together (include, several --pack, tracks),
on the web home page in-process, and the pack loader's checks of tracks and includes."""

from __future__ import annotations

import re
import shutil

import pytest

from alignlings.content.pack import PackError, load_pack


def teacher_pack(root, *, include=("dpo-grpo",), tracks=None):
    """Pack 'ipo' with one exercise, 'ipo-loss' (the built-in dpo-loss under another id)."""
    root.mkdir(parents=True)
    shutil.copytree(load_pack().get("dpo-loss").path, root / "ipo-loss")
    meta = root / "ipo-loss" / "exercise.toml"
    meta.write_text(meta.read_text().replace('id = "dpo-loss"', 'id = "ipo-loss"'))
    inc = ", ".join(f'"{i}"' for i in include)
    tracks = tracks if tracks is not None else """
[[track]]
id = "ipo-basics"
title = { en = "IPO basics", zh = "IPO 入门" }
requires = ["dpo-grpo-fill"]
exercises = ["ipo-loss"]
"""
    (root / "pack.toml").write_text(f'[pack]\nid = "ipo"\ntitle = {{ en = "IPO course", zh = "IPO 课程" }}\n'
                                    f'include = [{inc}]\norder = ["ipo-loss"]\n{tracks}', encoding="utf-8")
    return root


def test_include_puts_the_builtin_pack_first_and_tracks_in_order(tmp_path):
    course = load_pack(teacher_pack(tmp_path / "ipo"))
    assert [p.id for p in course.packs] == ["dpo-grpo", "ipo"] and course.id == "ipo"
    assert course.title["en"] == "IPO course" and course.path == (tmp_path / "ipo").resolve()
    keys = [t.key for t in course.tracks]
    assert keys[0] == "dpo-grpo/foundations" and keys[-1] == "ipo/ipo-basics"  # learning order: foundations first
    assert course.track("ipo-basics").requires == ("dpo-grpo-fill",)
    assert course.get("ipo-loss").pack == "ipo" and course.get("dpo-loss").pack == "dpo-grpo"
    assert course.get("ipo-loss").path.is_absolute()


def test_the_seed_track_holds_the_original_six(tmp_path):
    track = load_pack().track("dpo-grpo-fill")
    assert track.title == {"en": "DPO/GRPO fill-in, level 2–3", "zh": "DPO/GRPO 填空（难度 2–3）"}
    seed = tuple(e for e in track.exercises if not e.startswith("predict-"))  # predict items preview, they add no blanks
    assert seed == ("concepts", "dpo-loss", "grpo-advantages", "grpo-loss", "reward-model", "toy-grpo")


def test_without_tracks_one_implicit_track_holds_the_order(tmp_path):
    course = load_pack(teacher_pack(tmp_path / "ipo", include=(), tracks=""))
    (track,) = course.tracks
    assert track.implicit and track.exercises == ("ipo-loss",) and track.title["en"] == "IPO course"


def test_a_relative_path_and_a_repeated_pack_load_once(tmp_path, monkeypatch):
    teacher_pack(tmp_path / "ipo")
    monkeypatch.chdir(tmp_path)
    course = load_pack(["ipo", "dpo-grpo", str(tmp_path / "ipo")])
    assert [p.id for p in course.packs] == ["dpo-grpo", "ipo"]
    assert all(ex.path.is_absolute() for ex in course)


@pytest.mark.parametrize("tracks, message", [
    ('[[track]]\nid = "t"\nexercises = ["nope"]\n', "exercise 'nope' is not in \\[pack\\] order"),
    ('[[track]]\nid = "t"\nexercises = []\n', "exercises must be a non-empty list"),
    ('[[track]]\nexercises = ["ipo-loss"]\n', "missing field 'id'"),
    ('[[track]]\nid = "t"\nexercises = ["ipo-loss"]\n[[track]]\nid = "t"\nexercises = ["ipo-loss"]\n',
     "a second track with this id"),
    ('[[track]]\nid = "a"\nexercises = ["ipo-loss"]\n[[track]]\nid = "b"\nexercises = ["ipo-loss"]\n',
     "already in track 'a'"),
    ('[[track]]\nid = "t"\nrequires = ["nowhere"]\nexercises = ["ipo-loss"]\n', "requires 'nowhere' names no track"),
])
def test_bad_tracks_are_pack_errors_naming_the_file(tmp_path, tracks, message):
    teacher_pack(tmp_path / "ipo", tracks=tracks)
    with pytest.raises(PackError, match=message) as info:
        load_pack(tmp_path / "ipo")
    assert "pack.toml" in str(info.value)


def test_include_cycles_and_duplicate_ids_are_refused(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, other in ((a, "../b"), (b, "../a")):
        folder.mkdir()
        (folder / "pack.toml").write_text(f'[pack]\nid = "{folder.name}"\ninclude = ["{other}"]\n')
    with pytest.raises(PackError, match="cycle"):
        load_pack(a)
    teacher_pack(tmp_path / "ipo", include=())
    twin = tmp_path / "twin"
    shutil.copytree(tmp_path / "ipo", twin)
    with pytest.raises(PackError, match="two loaded packs have the id 'ipo'"):
        load_pack([tmp_path / "ipo", twin])
    with pytest.raises(PackError, match="not a folder"):
        load_pack(tmp_path / "missing")


# -- the web home page ---------------------------------------------------------------------------

def test_web_home_groups_by_pack_then_track(tmp_path):
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from alignlings.practice.store import ProgressStore
    from alignlings.web.app import create_app

    store = ProgressStore(tmp_path / "p.sqlite3")
    store.record_attempt("ipo-loss", {"passed": True}, code="", pack="ipo")
    store.record_attempt("dpo-loss", {"passed": False}, code="")
    app = create_app([str(teacher_pack(tmp_path / "ipo"))], store=store, warm_up=False)
    with TestClient(app) as c:
        page = c.get("/?lang=en").text
        zh = c.get("/?lang=zh").text
    at = 0
    for text in ('data-pack="dpo-grpo"', "Preference alignment", 'data-track="dpo-grpo/dpo-grpo-fill"',
                 "DPO/GRPO fill-in, level 2–3", 'data-id="dpo-loss"', 'data-pack="ipo"', "IPO course",
                 'data-track="ipo/ipo-basics"', "after: DPO/GRPO fill-in, level 2–3", 'data-id="ipo-loss"'):
        at = page.index(text, at)  # in this order
    assert re.search(r'class="exercise-item solved" data-id="ipo-loss"', page)
    assert re.search(r'class="exercise-item " data-id="dpo-loss"', page)
    assert "先完成：DPO/GRPO 填空（难度 2–3）" in zh and "IPO 入门" in zh
    store.close()
