"""The grader's reference values stay few (issue 19 §2): draws of inputs are bounded per exercise
(``MAX_VARIANTS``), the in-memory cache is a bounded LRU, and the disk cache drops older pack
versions and its oldest files. Before, every review answer drew a new variant: a new trusted run, a
new cache file and a never-evicted entry."""

from __future__ import annotations

import json

import pytest

from alignlings.grading import grader as gr
from alignlings.content.checks import MAX_VARIANTS
from alignlings.grading.grader import Grader, fold_variant
from alignlings.content.pack import load_pack

PACK = load_pack("dpo-grpo")


def test_variants_fold_into_a_few_draws():
    assert fold_variant(0) == 0
    assert {fold_variant(v) for v in range(1, 100)} == set(range(1, MAX_VARIANTS))
    assert MAX_VARIANTS <= 4


@pytest.fixture(scope="module")
def grader(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    home = tmp_path_factory.mktemp("home")
    mp.setenv("ALIGNLINGS_HOME", str(home))
    with Grader(PACK, warm=True) as g:
        g.home = home
        yield g
    mp.undo()


def _files(grader, exercise_id):
    return sorted((grader.home / "cache" / "expected").glob(f"{exercise_id}-*.json"))


def test_many_review_draws_cost_at_most_max_variants_runs(grader):
    ex = PACK.get("dpo-loss")
    fills = [b.answer for b in grader.blanks(ex)]
    fills[3] = "-F.logsigmoid(margin).sum()"
    for variant in range(1, 12):
        assert not grader.check("dpo-loss", fills=fills, quick=True, run_main=False, variant=variant)["passed"]
    assert len({v for (eid, v) in grader._trusted if eid == "dpo-loss"}) == MAX_VARIANTS - 1
    assert len(_files(grader, "dpo-loss")) == MAX_VARIANTS - 1


def test_a_check_without_a_variant_draws_one_of_a_few(grader):
    ex = PACK.get("grpo-advantages")
    fills = [b.answer for b in grader.blanks(ex)]
    seen = {grader.check(ex.key, fills=fills, run_main=False)["variant"] for _ in range(12)}
    assert seen <= set(range(MAX_VARIANTS)) and len(seen) > 1
    ex = PACK.get("reward-model")  # no fresh inputs in its cases: always its own
    fills = [b.answer for b in grader.blanks(ex)]
    assert {grader.check(ex.key, fills=fills, run_main=False)["variant"] for _ in range(3)} == {0}


def test_the_memory_cache_is_a_bounded_lru(grader, monkeypatch):
    monkeypatch.setattr(gr, "MEMORY_CACHE", 2)
    for eid in ("dpo-loss", "grpo-advantages", "reward-model"):
        grader.trusted(PACK.get(eid))
    assert len(grader._trusted) == 2
    assert ("reward-model", 0) in grader._trusted and ("grpo-advantages", 0) in grader._trusted


def test_the_disk_cache_drops_older_versions_and_the_oldest_files(grader, monkeypatch):
    folder = grader.home / "cache" / "expected"
    stale = folder / "ipo-000000000000000000000000.json"
    stale.write_text("{}")
    others = []
    for i in range(6):
        p = folder / f"zz-other-{i:024x}.json"
        p.write_text(json.dumps({"i": i}))
        others.append(p)
    monkeypatch.setattr(gr, "DISK_CACHE", len(list(folder.glob("*.json"))) - 3)
    grader._trusted.clear()
    grader.trusted(PACK.get("ipo"))
    left = list(folder.glob("*.json"))
    assert not stale.exists()  # the same exercise, another pack version
    assert len(left) <= gr.DISK_CACHE
    assert any(p.name.startswith("ipo-") for p in left)  # the file just written stays
