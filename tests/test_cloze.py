"""The MLM cloze drill: which tokens are maskable, drawing (seeded, weighted by past mistakes),
rendering and substituting, the Chinese snippet, and checking answers by behaviour.

check() needs a grader: the tests share one warm grader (the real sandbox) per pack.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from pathlib import Path

import pytest

from alignlings.practice import cloze as C
from alignlings.grading.grader import Grader
from alignlings.content.pack import Pack, load_exercise
from alignlings.practice.store import ProgressStore

PACKS = Path(__file__).resolve().parents[1] / "src" / "alignlings" / "packs" / "dpo-grpo"


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))


def _pack_of(*dirs: Path) -> Pack:
    """A pack of just these exercise folders (the built-in pack may be mid-edit)."""
    exercises = {e.id: e for e in map(load_exercise, dirs)}
    return Pack(id="test", path=dirs[0].parent, title={"en": "test", "zh": "test"}, exercises=exercises)


@pytest.fixture(scope="module")
def dpo():
    return load_exercise(PACKS / "dpo-loss")


class _Recording(Grader):
    """The real (warm) grader, recording each batch of variants it is asked to run."""

    def behaves_like_reference(self, exercise_id, variants):
        self.calls.append({"splices": dict(variants)})
        return super().behaves_like_reference(exercise_id, variants)


_graders: dict[tuple, _Recording] = {}


def in_process_grader(pack: Pack) -> Grader:
    """One warm grader per set of exercise folders for the whole module (fork server started once)."""
    key = tuple(sorted(str(e.path) for e in pack))
    g = _graders.get(key)
    if g is None:
        g = _graders[key] = _Recording(pack, warm=True)
    g.calls = []
    return g


@pytest.fixture(scope="module", autouse=True)
def _close_graders():
    yield
    for g in _graders.values():
        g.close()
    _graders.clear()


def by_key(source: str) -> dict[str, C.Position]:
    return {p.key: p for p in C.maskable_positions(source)}


def tokens(source: str) -> list[tuple[str, str]]:
    return [(p.token, p.kind) for p in C.maskable_positions(source)]


# -- what is maskable ------------------------------------------------------------------------

SAMPLE = textwrap.dedent('''\
    """Module docstring: never masked."""
    import torch
    from math import inf as INF

    LIMIT = 3  # module level: not inside a function body


    def f(x, *args, scale=2.5, **kw) -> float:
        """Docstring: a string."""
        import math
        y = -x ** 2 // 3 % 7  # comment with names: y x
        if y is not None and not y <= 0:
            y += 1e-3
        z = [a @ b for a, b in zip(args, args)]
        w = {"k": y, **kw}
        g = print(*args, sep="-", end=f"{y}")
        q = x.real.imag != x[0:1] >= 2
        r = lambda *a: a
        return y if y else math.inf


    class Model:
        width = 4

        @staticmethod
        def go(self):
            _ = self.width << 1
            return self.go
    ''')


def test_maskable_classification():
    got = tokens(SAMPLE)
    kinds = {}
    for tok, kind in got:
        kinds.setdefault(tok, set()).add(kind)
    # names, attributes, numbers and operators are maskable
    for name in ("y", "x", "z", "a", "b", "zip", "args", "w", "kw", "g", "print", "q", "r", "math", "self", "go"):
        assert "name" in kinds[name], name
    assert kinds["real"] == {"attr"} and kinds["imag"] == {"attr"} and kinds["width"] >= {"attr", "name"}
    assert kinds["inf"] == {"attr"}
    for number in ("2", "3", "7", "1e-3", "0", "1", "4"):
        assert kinds[number] == {"number"}, number
    for op in ("=", "-", "**", "//", "%", "<=", "+=", "@", "!=", ">=", "<<"):
        assert kinds[op] == {"op"}, op
    # never: keywords (soft ones too), brackets, commas, colons, dots, strings, comments, '->', unpacking stars
    for never in ("if", "is", "not", "None", "and", "for", "in", "return", "lambda", "else", "import", "class", "def",
                  "_", "(", ")", "[", "]", "{", "}", ",", ":", ".", "->", '"k"', '"-"', "sep=", "#"):
        assert never not in kinds, never
    assert not any(t.startswith(('"', "'", "f\"", "#")) for t, _ in got)


def test_unpacking_stars_and_decorators_are_not_operators():
    src = SAMPLE.splitlines()
    stars = [p for p in C.maskable_positions(SAMPLE) if p.token in ("*", "**", "@")]
    # only `x ** 2` and `a @ b` are operators; `*args`, `**kw`, `*a`, `@staticmethod` are not
    assert sorted((src[p.line - 1].strip().split()[0], p.token) for p in stars) == [("y", "**"), ("z", "@")]


def test_only_function_and_class_bodies():
    positions = C.maskable_positions(SAMPLE)
    lines = SAMPLE.splitlines()
    body_lines = {i for i, line in enumerate(lines, start=1) if line.startswith("    ")}
    assert {p.line for p in positions} <= body_lines
    text = {lines[p.line - 1].strip() for p in positions}
    assert not any(t.startswith(("import", "from", "def f(", "LIMIT", '"""')) for t in text)
    # the def signature is not the body; a class body is, with its methods (names only: '@' is no operator)
    assert not any(p.line == 8 for p in positions)
    assert any(lines[p.line - 1].strip().startswith("_ = self.width") for p in positions)


def test_positions_point_at_their_tokens():
    lines = SAMPLE.splitlines()
    for p in C.maskable_positions(SAMPLE):
        assert lines[p.line - 1][p.col:p.end_col] == p.token
        assert p.key == f"{p.line}:{p.col}" and p.kind in C.KINDS
    keys = [p.key for p in C.maskable_positions(SAMPLE)]
    assert len(keys) == len(set(keys))


def test_non_ascii_columns_are_characters():
    src = 'def f(x):\n    s = "张三" + x  # 中文注释 y\n    return s * 2\n'
    p = by_key(src)
    assert [q.token for q in p.values()] == ["s", "=", "+", "x", "s", "*", "2"]
    line = src.splitlines()[1]
    assert all(line[q.col:q.end_col] == q.token for q in p.values() if q.line == 2)


def test_invalid_python_is_refused():
    with pytest.raises(C.ClozeError, match="not valid Python"):
        C.maskable_positions("def f(:\n")


# -- the snippet -----------------------------------------------------------------------------

def test_dpo_snippet(dpo):
    s = C.snippet_source(dpo)
    assert "__main__" not in s and "def dpo_loss" in s and "BLANK" not in s
    positions = C.maskable_positions(s)
    toks = [p.token for p in positions]
    assert {"chosen_implicit_r", "beta", "margin", "logsigmoid", "mean", "-", "*", "="} <= set(toks)
    assert "import" not in toks and "torch" not in toks  # the imports are not drilled
    assert not any(p.line <= 6 for p in positions)  # nothing from the docstring, imports or signature
    assert C.counter_text(len(positions), 4) == f"{len(positions)} maskable · 4 masked"
    assert C.counter_text(34, 6, "zh") == "可遮盖 34 处 · 已遮盖 6 处"


def test_zh_snippet_keeps_chinese_comments_and_keys(dpo):
    en, zh = C.snippet_source(dpo, "en"), C.snippet_source(dpo, "zh")
    assert zh != en and "对数概率" in zh and "logsigmoid 仍保持有限" in zh
    assert zh.encode("utf-8").decode("utf-8") == zh  # valid UTF-8 (no lone surrogates)
    assert [(p.key, p.token) for p in C.maskable_positions(zh)] == [(p.key, p.token) for p in C.maskable_positions(en)]
    masked = C.draw(C.maskable_positions(zh), ratio=0.5, seed=3)
    view = C.render(zh, masked)
    assert "对数概率" in view and view.encode("utf-8")
    assert C.substitute(zh, {p.key: p.token for p in masked}) == zh


def test_strip_main_keeps_line_numbers():
    src = "def f():\n    return 1\n\n\nif __name__ == '__main__':\n    print(f())\n"
    assert C.strip_main(src) == "def f():\n    return 1\n"
    assert C.strip_main("def f():\n    return 1\n") == "def f():\n    return 1\n"


def test_cloze_exercises(dpo):
    assert [e.id for e in C.cloze_exercises(_pack_of(PACKS / "dpo-loss"))] == ["dpo-loss"]


# -- drawing -----------------------------------------------------------------------------------

def _positions(n: int) -> list[C.Position]:
    return [C.Position(key=f"{i + 1}:4", line=i + 1, col=4, end_col=5, token="x", kind="name") for i in range(n)]


@pytest.mark.parametrize("n, ratio, k", [(25, 0.15, 4), (34, 0.15, 5), (10, 0.01, 1), (10, 1.0, 10), (7, 0.5, 4),
                                         (1, 0.1, 1)])
def test_draw_size(n, ratio, k):
    masked = C.draw(_positions(n), ratio=ratio, seed=0)
    assert len(masked) == k
    assert len({p.key for p in masked}) == k
    assert masked == sorted(masked, key=lambda p: (p.line, p.col))  # reading order


def test_draw_nothing_to_mask():
    assert C.draw([], seed=1) == []


@pytest.mark.parametrize("ratio", [0, -0.1, 1.5, float("nan"), "0.2", True])
def test_draw_bad_ratio(ratio):
    with pytest.raises(ValueError, match="ratio"):
        C.draw(_positions(10), ratio=ratio)


def test_draw_seed_replays_and_no_seed_varies(dpo):
    positions = C.maskable_positions(C.snippet_source(dpo))
    assert C.draw(positions, seed=42) == C.draw(positions, seed=42)
    assert len({tuple(p.key for p in C.draw(positions, seed=s)) for s in range(20)}) > 10
    assert len({tuple(p.key for p in C.draw(positions)) for _ in range(20)}) > 5
    # every position gets drawn sometime
    seen = {p.key for s in range(300) for p in C.draw(positions, seed=s)}
    assert seen == {p.key for p in positions}


def test_wrong_positions_come_back_more_often(tmp_path):
    positions = _positions(30)
    hard, known = positions[7], positions[11]
    with ProgressStore(tmp_path / "p.sqlite3") as store:
        for _ in range(5):
            store.record_cloze("s", [{"key": hard.key, "token": "x", "correct": False},
                                     {"key": known.key, "token": "x", "correct": True}])
        stats = store.cloze_stats("s")
    counts = Counter(p.key for seed in range(2000) for p in C.draw(positions, ratio=0.15, seed=seed, stats=stats))
    others = [counts[p.key] for p in positions if p not in (hard, known)]
    mean_other = sum(others) / len(others)
    assert counts[hard.key] > 2.5 * mean_other  # weight 4 vs 1: drawn much more often
    assert counts[known.key] < 0.6 * mean_other  # five right in a row: comes back rarely, but still comes back
    assert counts[known.key] > 0
    # without stats, all alike
    flat = Counter(p.key for seed in range(2000) for p in C.draw(positions, ratio=0.15, seed=seed))
    assert max(flat.values()) < 1.4 * min(flat.values())


def test_stats_for_another_token_are_ignored():
    positions = _positions(10)
    stale = {positions[0].key: {"seen": 9, "wrong": 9, "streak": 0, "token": "y", "due": 4.0}}
    fresh = {positions[0].key: {"seen": 9, "wrong": 9, "streak": 0, "token": "x", "due": 4.0}}

    def count(stats):
        return sum(positions[0] in C.draw(positions, ratio=0.1, seed=s, stats=stats) for s in range(1000))

    assert count(stale) < 200 < 300 < count(fresh)


# -- render and substitute ---------------------------------------------------------------------

def test_render_and_substitute_round_trip(dpo):
    s = C.snippet_source(dpo)
    positions = C.maskable_positions(s)
    for seed in range(10):
        masked = C.draw(positions, ratio=0.4, seed=seed)
        view = C.render(s, masked)
        assert view.count("____") == len(masked)
        assert C.render(s, masked, {p.key: p.token for p in masked}) == s
        assert C.substitute(s, {p.key: p.token for p in masked}) == s
    assert C.render(s, []) == s


def test_several_masks_on_one_line(dpo):
    s = C.snippet_source(dpo)
    line12 = [p for p in C.maskable_positions(s) if p.line == 12]
    assert [p.token for p in line12] == ["loss", "=", "-", "F", "logsigmoid", "margin", "mean"]
    out = C.substitute(s, {"12:11": "", "12:12": "torch.nn.functional", "12:14": "logsigmoid", "12:33": "nanmean"})
    assert out.splitlines()[11] == "    loss = torch.nn.functional.logsigmoid(margin).nanmean()"
    view = C.render(s, line12)
    assert view.splitlines()[11] == "    ____ ____ ____ ____.____(____).____()"  # '-F' both masked stay apart
    numbered = C.render(s, line12[2:4], {line12[2].key: "[1]", line12[3].key: "[2]"})
    assert numbered.splitlines()[11] == "    loss = [1][2].logsigmoid(margin).mean()"


def test_substitute_refuses_unknown_keys(dpo):
    s = C.snippet_source(dpo)
    with pytest.raises(ValueError, match="'1:0'"):
        C.substitute(s, {"1:0": "x"})
    with pytest.raises(ValueError, match="one line"):
        C.substitute(s, {"12:33": "mean\nimport os"})


# -- check -------------------------------------------------------------------------------------

def _mask(source: str, *keys: str) -> list[C.Position]:
    b = by_key(source)
    return [b[k] for k in keys]


def test_check_dpo(dpo):
    grader = in_process_grader(_pack_of(PACKS / "dpo-loss"))
    s = C.snippet_source(dpo, "zh")
    masked = _mask(s, "8:43", "10:18", "12:11", "12:12", "12:33", "13:11", "9:49")
    answers = {
        "8:43": "-",                     # exact
        "10:18": "+",                    # wrong: beta + (...)
        "12:11": " ",                    # empty
        "12:12": "torch.nn.functional",  # equivalent: the module F names
        "12:33": "nanmean",              # equivalent: no NaNs in these cases
        "9:49": "ref_chosen_logp",       # wrong: the chosen reference for the rejected answer
    }                                    # 13:11 not answered: empty
    results = C.check(dpo, s, masked, answers, grader)
    assert [r["key"] for r in results] == ["8:43", "9:49", "10:18", "12:11", "12:12", "12:33", "13:11"]
    got = {r["key"]: (r["how"], r["correct"]) for r in results}
    assert got == {"8:43": ("exact", True), "9:49": ("wrong", False), "10:18": ("wrong", False),
                   "12:11": ("empty", False), "12:12": ("equivalent", True), "12:33": ("equivalent", True),
                   "13:11": ("empty", False)}
    assert all(set(r) == {"key", "token", "answer", "correct", "how"} for r in results)
    assert len(grader.calls) == 1  # one grader run for every non-exact answer
    variants = grader.calls[0]["splices"]
    assert set(variants) == {"9:49", "10:18", "12:12", "12:33"}
    # each variant is the full file (the __main__ section too) with only its own answer changed
    assert all("__main__" in v for v in variants.values())
    assert "torch.nn.functional.logsigmoid(margin).mean()" in variants["12:12"]
    assert "-F.logsigmoid(margin).nanmean()" in variants["12:33"]


def test_check_all_exact_needs_no_grader_run(dpo):
    grader = in_process_grader(_pack_of(PACKS / "dpo-loss"))
    s = C.snippet_source(dpo)
    masked = C.draw(C.maskable_positions(s), ratio=0.3, seed=5)
    results = C.check(dpo, s, masked, {p.key: p.token for p in masked}, grader)
    assert all(r["how"] == "exact" and r["correct"] for r in results)
    assert grader.calls == []


def test_check_syntax_errors_are_wrong_without_running(dpo):
    grader = in_process_grader(_pack_of(PACKS / "dpo-loss"))
    s = C.snippet_source(dpo)
    results = C.check(dpo, s, _mask(s, "10:18"), {"10:18": "* *"}, grader)
    assert results[0]["how"] == "wrong" and grader.calls == []


def test_check_results_feed_the_store(dpo, tmp_path):
    grader = in_process_grader(_pack_of(PACKS / "dpo-loss"))
    s = C.snippet_source(dpo)
    results = C.check(dpo, s, _mask(s, "12:33"), {"12:33": "sum"}, grader)
    with ProgressStore(tmp_path / "p.sqlite3") as store:
        store.record_cloze("dpo-loss", results)
        assert store.cloze_stats("dpo-loss")["12:33"]["wrong"] == 1


def test_check_refuses_positions_of_another_snippet(dpo):
    grader = in_process_grader(_pack_of(PACKS / "dpo-loss"))
    s = C.snippet_source(dpo)
    with pytest.raises(ValueError, match="12:4"):
        C.check(dpo, s, [C.Position("12:4", 12, 4, 8, "lose", "name")], {"12:4": "lose"}, grader)


@pytest.fixture
def double_pack(tmp_path):
    """A synthetic exercise where `2` and `2.0` behave the same (float inputs) and `3` does not."""
    ex = tmp_path / "pack" / "double"
    (ex / "texts").mkdir(parents=True)
    (ex.parent / "pack.toml").write_text('[pack]\nid = "t"\norder = ["double"]\n', encoding="utf-8")
    (ex / "exercise.toml").write_text('id = "double"\nkind = "code"\ncloze = true\nentry = ["double"]\n'
                                      'title = { en = "Double", zh = "翻倍" }\n', encoding="utf-8")
    (ex / "solution.py").write_text(textwrap.dedent('''\
        """Double a tensor."""
        import torch


        def double(x):
            # twice the input
            y = x * 2  # BLANK
            return y


        if __name__ == "__main__":
            print(double(torch.tensor([1.0, 2.0])))
        '''), encoding="utf-8")
    (ex / "check.py").write_text(textwrap.dedent('''\
        from alignlings.content.checks import Case


        def cases():
            import torch

            def floats(m):
                return m.double(torch.tensor([1.5, -2.0, 3.25]))

            return [Case("floats", "visible", floats)]
        '''), encoding="utf-8")
    for lang, comments in (("en", ""), ("zh", '[comments]\n"twice the input" = "输入的两倍"\n')):
        (ex / "texts" / f"{lang}.toml").write_text(
            f'statement = "x"\nblanks = ["y"]\nhints = ["a", "b", "c"]\n{comments}', encoding="utf-8")
    return _pack_of(ex)


def test_check_equivalent_number(double_pack):
    ex = double_pack.get("double")
    grader = in_process_grader(double_pack)
    s = C.snippet_source(ex, "zh")
    assert "输入的两倍" in s and "__main__" not in s
    assert [p.token for p in C.maskable_positions(s)] == ["y", "=", "x", "*", "2", "y"]
    key = next(p.key for p in C.maskable_positions(s) if p.token == "2")
    results = {a: C.check(ex, s, _mask(s, key), {key: a}, grader)[0]["how"] for a in ("2", "2.0", "3", "(1 + 1)")}
    assert results == {"2": "exact", "2.0": "equivalent", "3": "wrong", "(1 + 1)": "equivalent"}


@pytest.mark.slow
def test_check_through_the_real_sandbox(dpo):
    pytest.importorskip("alignlings.grading.sandbox")
    grader = Grader(_pack_of(PACKS / "dpo-loss"))
    s = C.snippet_source(dpo)
    results = C.check(dpo, s, _mask(s, "12:11", "12:33", "10:18"), {"12:11": "+", "12:33": "nanmean", "10:18": "*"},
                      grader)
    assert {r["key"]: r["how"] for r in results} == {"10:18": "exact", "12:11": "wrong", "12:33": "equivalent"}


def test_masks_prefer_tokens_worth_recalling(dpo):
    """An assignment's '=' (the same in every program) comes up far less often than names, calls
    and constants; every position still comes up sometime."""
    positions = C.maskable_positions(C.snippet_source(dpo))
    assigns = [p for p in positions if p.token == "="]
    names = [p for p in positions if p.kind in ("name", "attr")]
    assert assigns and names
    counts = Counter(p.key for seed in range(1500) for p in C.draw(positions, ratio=0.15, seed=seed))
    per_assign = sum(counts[p.key] for p in assigns) / len(assigns)
    per_name = sum(counts[p.key] for p in names) / len(names)
    assert per_assign < 0.4 * per_name, (per_assign, per_name)
    assert C.worth(assigns[0]) < C.worth(names[0])
    minus = next(p for p in positions if p.token == "-")
    assert C.worth(minus) > 3 * C.worth(assigns[0])  # an operator that changes meaning is worth recalling
