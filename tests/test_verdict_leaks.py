"""Nothing that would solve an exercise flows back in a verdict (issue 19 §2).

1. Hidden and edge cases show no values: a dpo-loss file that is only a lookup table keyed by a hash
   of its inputs, fed with every expected value it can read back from verdicts, never passes. The
   same file fed with the true values does pass (so the attack is real and the test can fail), and
   no hidden or edge message says "expected".
2. A blank's splice runs in a process that holds the reference: a fill that walks the stack to the
   splice's source and raises it, or names an exception class after it, gets back only a built-in
   exception type and its own line, never the reference's text.
"""

from __future__ import annotations

import json
import re
import types

import pytest

from alignlings.content import checks
from alignlings.grading.grader import Grader
from alignlings.content.pack import load_pack

PACK = load_pack("dpo-grpo")

KEY_SOURCE = '''
import hashlib


def _key(*xs):
    return hashlib.sha256(repr([x.detach().tolist() if hasattr(x, "detach") else float(x) for x in xs])
                          .encode()).hexdigest()[:16]
'''

LOOKUP = '''import torch
TABLE = {table!r}
''' + KEY_SOURCE + '''

def dpo_loss(policy_chosen_logp, policy_rejected_logp, ref_chosen_logp, ref_rejected_logp, beta=0.1):
    entry = TABLE.get(_key(policy_chosen_logp, policy_rejected_logp, ref_chosen_logp, ref_rejected_logp, beta))
    zero = (policy_chosen_logp * 0).sum() + (policy_rejected_logp * 0).sum()  # keeps a graph where asked
    if entry is None:
        return zero
    loss = torch.tensor(entry["loss"]) + zero
    if entry.get("grads"):  # a surrogate whose value is the loss and whose gradient is the table's
        for x, g in zip((policy_chosen_logp, policy_rejected_logp), entry["grads"]):
            term = (x * torch.tensor(g)).sum()
            loss = loss + term - term.detach()
    return loss
'''

_ns: dict = {}
exec(KEY_SOURCE, _ns)  # noqa: S102 - the same key function the learner's file uses
key = _ns["_key"]


def _case_keys() -> dict[str, set[str]]:
    """For each dpo-loss case, the keys of the inputs its dpo_loss call gets, in every draw."""
    out: dict[str, set[str]] = {}
    source = (PACK.get("dpo-loss").path / "check.py").read_text()
    for variant in range(getattr(checks, "MAX_VARIANTS", 1)):
        checks.VARIANT = variant
        namespace: dict = {}
        exec(compile(source, "check.py", "exec"), namespace)  # noqa: S102 - pack code
        for case in namespace["cases"]():
            seen = out.setdefault(case.name, set())

            def record(pc, pr, rc, rr, beta=0.1, seen=seen):
                seen.add(key(pc, pr, rc, rr, beta))
                return (pc * 0).sum() + (pr * 0).sum()

            case.run(types.SimpleNamespace(dpo_loss=record))
    checks.VARIANT = 0
    return out


def _true_table() -> dict:
    """What a learner who could read every expected value would put in the table."""
    solution = {}
    exec(compile(PACK.get("dpo-loss").solution_source, "solution.py", "exec"), solution)  # noqa: S102
    table = {}

    def record(pc, pr, rc, rr, beta=0.1):
        loss = solution["dpo_loss"](pc, pr, rc, rr, beta)
        entry = {"loss": float(loss.detach())}
        if pc.requires_grad:
            a, b = (t.detach().requires_grad_() for t in (pc, pr))
            solution["dpo_loss"](a, b, rc, rr, beta).backward()
            entry = {"loss": 0.0, "grads": [a.grad.tolist(), b.grad.tolist()]}
        table[key(pc, pr, rc, rr, beta)] = entry
        return (pc * 0).sum() + (pr * 0).sum()

    source = (PACK.get("dpo-loss").path / "check.py").read_text()
    for variant in range(getattr(checks, "MAX_VARIANTS", 1)):
        checks.VARIANT = variant
        namespace: dict = {}
        exec(compile(source, "check.py", "exec"), namespace)  # noqa: S102 - pack code
        for case in namespace["cases"]():
            case.run(types.SimpleNamespace(dpo_loss=record))
    checks.VARIANT = 0
    return table


NUMBER = r"(-?(?:\d+\.?\d*(?:e[-+]?\d+)?|inf))"


def _learn(table: dict, keys: dict[str, set[str]], verdict: dict) -> None:
    """Everything a verdict gives away, into the table: a scalar "expected X" for the case's inputs,
    or gradient elements "[i] expected X, got Y" (of the gradient whose element i is the Y we sent)."""
    for case in verdict["cases"]:
        if case["passed"]:
            continue
        message = case["message"]
        elements = re.findall(r"\[(\d+)\] expected " + NUMBER + ", got " + NUMBER, message)
        scalar = re.search(r": expected " + NUMBER + ", got", message)
        for k in keys[case["name"]]:
            if elements:
                grads = table.setdefault(k, {"loss": 0.0, "grads": [[0.0] * 5, [0.0] * 5]})["grads"]
                for i, want, sent in elements:
                    part = next((p for p in (0, 1) if abs(grads[p][int(i)] - float(sent)) <= 1e-4 * abs(float(sent))
                                 + 1e-9), 0)
                    grads[part][int(i)] = float(want)
            elif scalar:
                table[k] = {"loss": float(scalar.group(1))}


@pytest.fixture(scope="module")
def grader(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("ALIGNLINGS_HOME", str(tmp_path_factory.mktemp("home")))
    with Grader(PACK, warm=True) as g:
        yield g
    mp.undo()


def test_the_lookup_table_passes_when_it_knows_the_values(grader):
    """The control: with the expected values, this file passes on every draw of inputs."""
    code = LOOKUP.format(table=_true_table())
    for variant in range(getattr(checks, "MAX_VARIANTS", 1)):
        verdict = grader.check("dpo-loss", code, run_main=False, variant=variant)
        assert verdict["passed"], [c["message"] for c in verdict["cases"] if not c["passed"]]


def test_a_lookup_table_fed_by_verdicts_never_passes(grader):
    keys = _case_keys()
    table: dict = {}
    for _ in range(8):
        verdict = grader.check("dpo-loss", LOOKUP.format(table=table), run_main=False)
        assert not verdict["passed"]
        for case in verdict["cases"]:
            if case["kind"] != "visible" and not case["passed"]:
                assert "expected" not in case["message"], case["message"]
                assert not re.search(r"\d\.\d{3}", case["message"].split(";")[0]), case["message"]
        _learn(table, keys, verdict)
    hidden = [c for c in verdict["cases"] if c["kind"] != "visible"]
    assert not all(c["passed"] for c in hidden)


REFERENCE_ANSWERS = ["policy_chosen_logp - ref_chosen_logp", "policy_rejected_logp - ref_rejected_logp",
                     "chosen_implicit_r - rejected_implicit_r", "logsigmoid"]

STACK_LEAK = ('exec("import sys\\nf = sys._getframe()\\nwhile f is not None:\\n    c = f.f_locals.get(\'code\')\\n'
              '    if isinstance(c, str):\\n        raise ValueError(c.replace(chr(10), \' | \'))\\n    f = f.f_back")')

CLASS_LEAK = ('exec("import sys\\nf = sys._getframe()\\nwhile f is not None:\\n    c = f.f_locals.get(\'code\')\\n'
              '    if isinstance(c, str):\\n        n = \'\'.join(ch for ch in c.split(\'implicit_r = \')[1][:40] '
              'if ch.isalnum())\\n        raise type(\'X\' + n, (Exception,), {})()\\n    f = f.f_back")')


@pytest.mark.parametrize("fill", [STACK_LEAK, CLASS_LEAK], ids=["message", "class name"])
@pytest.mark.parametrize("blank", [3, 4])
def test_a_fill_cannot_raise_the_reference_through_the_stack(grader, fill, blank):
    fills = ["_____"] * 4
    fills[blank - 1] = fill
    verdict = grader.check("dpo-loss", fills=fills, run_main=False, variant=0)
    said = json.dumps(verdict)
    for answer in REFERENCE_ANSWERS[: blank - 1]:
        assert answer not in said, said
    assert "policychosenlogp" not in said.lower().replace("_", "")
    entry = verdict["blanks"][blank - 1]
    # issue 29: the fill runs in the learner's own job (no splice), after blanks 1-2 already failed
    assert entry["passed"] is not True
    assert not verdict["passed"]


def test_the_stack_leak_would_reach_the_reference_if_its_text_came_back():
    """The control: run the splice as the job does and the error's message is the reference."""
    from alignlings.content import blanks as bl
    from alignlings.grading import casejob

    ex = PACK.get("dpo-loss")
    blanks = bl.find_blanks(ex.solution_source)
    code = bl.splice(ex.solution_source, blanks, 4, STACK_LEAK)
    out = casejob._evaluate(casejob.load_cases((ex.path / "check.py").read_text()), code)
    first = next(iter(out["cases"].values()))["error"]
    assert REFERENCE_ANSWERS[0] in first


def test_a_python_number_passes_where_a_scalar_tensor_is_expected(grader):
    """Issue 21 §1: reward-eval blank 1 with .item() is right (the statement asks for a number)."""
    ex = PACK.get("reward-eval")
    fills = [b.answer for b in grader.blanks(ex)]
    fills[0] = "(chosen_rewards > rejected_rewards).float().mean().item()"
    verdict = grader.check("reward-eval", fills=fills, run_main=False)
    assert verdict["passed"], [b["message"] for b in verdict["blanks"]]
    fills[0] = "(chosen_rewards >= rejected_rewards).float().mean().item() + 0.5"
    assert not grader.check("reward-eval", fills=fills, run_main=False)["passed"]


VALUE_LEAK = ('exec("import sys, torch\\nf = sys._getframe()\\nwhile f is not None:\\n    c = f.f_locals.get(\'code\')\\n'
              '    if isinstance(c, str):\\n        globals()[\'_leak\'] = torch.tensor(float(ord(c.split(\'implicit_r = \')'
              '[1][0])))\\n        break\\n    f = f.f_back") or _leak')


def test_a_fill_cannot_carry_the_reference_out_in_its_value(grader):
    """The fill's value is the code of the reference's first character ('p' = 112) in the splice: a
    visible case shows a splice's number only when the learner's own file gave the same."""
    fills = ["_____"] * 4
    fills[3] = VALUE_LEAK
    verdict = grader.check("dpo-loss", fills=fills, run_main=False, variant=0)
    entry = verdict["blanks"][3]
    assert entry["passed"] is not True  # issue 29: never reached in the learner's own run (blank 1 is empty)
    assert "112" not in json.dumps(entry), entry
    assert entry["diff"] is None or entry["diff"].get("redacted"), entry["diff"]


def test_a_splice_shows_its_numbers_when_the_learners_file_agrees(grader):
    """One wrong blank: the learner's own file computes the same value, so the numbers are shown."""
    ex = PACK.get("dpo-loss")
    fills = [b.answer for b in grader.blanks(ex)]
    fills[3] = "-F.logsigmoid(margin).mean() * 1.5"
    entry = grader.check("dpo-loss", fills=fills, run_main=False, variant=0)["blanks"][3]
    assert re.search(r"expected 0\.65898, got 0\.98847", entry["message"]), entry["message"]


@pytest.mark.parametrize("fork_server", [True, False], ids=["per-check fork server", "cold bubblewrap"])
def test_the_stack_leak_fails_on_the_cli_paths_too(fork_server, tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path))
    fills = ["_____"] * 4
    fills[3] = STACK_LEAK
    with Grader(PACK, fork_server=fork_server) as cli_grader:
        verdict = cli_grader.check("dpo-loss", fills=fills, run_main=False, variant=0)
    said = json.dumps(verdict)
    assert not any(answer in said for answer in REFERENCE_ANSWERS[:3]), said
    assert verdict["blanks"][3]["passed"] is not True


def _t(a, dtype="float32"):
    import numpy as np

    from alignlings.grading import values as V

    return V.TensorValue(dtype, np.array(a, dtype=dtype))


@pytest.mark.parametrize("expected, got, en, zh", [
    (_t([1.0, 2.0, 3.0]), _t([2.0, 4.0, 6.0]), "the value differs", "数值不同"),
    (_t([1.0, 2.0, 3.0]), _t([-1.0, -2.0, -3.0]), "the value differs", "数值不同"),
    (_t([1.0, 2.0]), _t([1.0, float("nan")]), "NaN where the reference is finite", "NaN"),
    (_t(0.5), 0.52, "the value differs", "数值不同"),
    (_t([True, False], "bool"), _t([True, True], "bool"), "the value differs", "数值不同"),
])
def test_a_hidden_difference_is_told_in_words_only(expected, got, en, zh):
    from alignlings.grading import values as V
    from alignlings.grading.feedback import describe_case

    diff = V.redact(V.compare(expected, got))
    assert diff is not None and not {"expected", "got", "first", "max_abs_diff", "mean_abs_diff"} & set(diff)
    result = {"name": "random batch", "passed": False, "diff": diff, "kind": "hidden"}
    said_en, said_zh = describe_case(result, "en"), describe_case(result, "zh")
    assert en in said_en and "not shown" in said_en
    assert zh in said_zh and "不显示数值" in said_zh
    assert not re.search(r"\d\.\d", said_en.replace("0.1%", "")), said_en


@pytest.mark.parametrize("got", [0.1, 0.49, 0.51, 2.0, 1e6, -0.5, -1e6])
def test_a_hidden_case_says_nothing_that_depends_on_the_distance(got):
    """Issue 29 §2: the band "relative error over 100 %" was a comparison oracle (is the hidden
    value above twice mine?). Every wrong finite value of a hidden case now reads the same."""
    from alignlings.grading import values as V
    from alignlings.grading.feedback import describe_case

    diff = V.redact(V.compare(_t([0.5, 0.25]), _t([got, 0.25])))
    assert set(diff) <= {"path", "reason", "shape", "got_nan", "redacted"}, diff
    said = {lang: describe_case({"name": "random batch", "passed": False, "diff": diff, "kind": kind}, lang)
            for lang in ("en", "zh") for kind in ("hidden",)}
    baseline = V.redact(V.compare(_t([0.5, 0.25]), _t([0.75, 0.25])))
    assert diff == baseline
    assert said["en"] == "case 'random batch': the value differs; values of hidden and edge cases are not shown"


def test_a_visible_case_never_says_hidden_values_are_not_shown():
    """Issue 31 §8: "values of hidden and edge cases are not shown" on a visible case is wrong."""
    from alignlings.grading import values as V
    from alignlings.grading.feedback import describe_case

    diff = V.redact(V.compare(_t([0.5]), _t([0.7])))
    for lang in ("en", "zh"):
        said = describe_case({"name": "spec", "passed": False, "diff": diff, "kind": "visible"}, lang)
        assert "not shown" not in said and "不显示数值" not in said, said
