"""A check's trusted judgement without a second job where the reference already judged the same
scope (issue 29, the < 50 ms goal), and the faster paths of a warm check around it.

A blank's judgement (``casejob.judge_blanks``) reads only its record's scope entries for the names
its fills read, torch's random state and grad mode, the names it differentiates for, and whether it
is a statement: ``Grader._judge_key`` hashes exactly those. The trusted run keeps the judging job's
results on the reference's own records by that key (``TrustedRun.judged``); a learner's record with
the same key (every blank before it right, the same draw of inputs) takes the reference's
judgement, and only the others go to a judging job. These tests hold the reuse to giving the
verdicts the job gives, and the faster paths (numpy's array format written and read directly,
source segments, the reference parsed once) to the results of the slower ones.
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import io
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alignlings.content import blanks as bl
from alignlings.content.pack import load_pack
from alignlings.grading import grader as grader_module
from alignlings.grading import instrument, values
from alignlings.grading.grader import Grader

PACK = load_pack("dpo-grpo")


# -- numpy's array format, written and read directly ----------------------------------------------
DTYPES = ["<f2", "<f4", "<f8", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "|b1"]


@settings(max_examples=200, deadline=None)
@given(dtype=st.sampled_from(DTYPES), shape=st.lists(st.integers(0, 5), max_size=4), seed=st.integers(0, 2**16))
def test_arrays_are_written_as_numpy_save_writes_them_and_read_back(dtype, shape, seed):
    array = (np.random.default_rng(seed).standard_normal(shape) * 50).astype(dtype)
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    assert values._npy(array) == buf.getvalue()
    back = values._from_npy(buf.getvalue())
    assert back.dtype == array.dtype and back.shape == array.shape
    assert np.array_equal(back, array, equal_nan=True)
    assert back.flags.writeable  # a copy, not a view of the wire bytes


def test_other_arrays_go_through_numpy_itself():
    for array in (np.asfortranarray(np.arange(6.0).reshape(2, 3)), np.arange(3, dtype=">f4"),
                  np.zeros(2, dtype=np.complex64)):
        buf = io.BytesIO()
        np.save(buf, array, allow_pickle=False)
        assert values._npy(array) == buf.getvalue()
        assert np.array_equal(values._from_npy(buf.getvalue()), array)


@pytest.mark.parametrize("tamper", ["short", "long", "shape", "object", "pickle"])
def test_a_tampered_array_is_refused(tamper):
    good = values._npy(np.arange(6, dtype=np.float32).reshape(2, 3))
    data = {
        "short": good[:-1],
        "long": good + b"\0\0\0\0",
        "shape": good.replace(b"(2, 3)", b"(3, 3)"),
        "object": good.replace(b"'<f4'", b"'|O8'"),
        "pickle": b"\x80\x04K\x01.",
    }[tamper]
    wire = {"__tensor__": "float32", "shape": [2, 3], "npy": base64.b64encode(data).decode()}
    with pytest.raises(values.DecodeError):
        values.decode(wire)


# -- where a blank is in a learner's file ----------------------------------------------------------
def test_source_segments_are_those_of_ast():
    for ex in PACK.fill_exercises():
        code = ex.solution_source + "\r\nx = ('é',\r  1)\n\fy = {'a': [1,\n 2]}"
        segment = instrument._Segments(code)
        for node in ast.walk(ast.parse(code)):
            if hasattr(node, "end_lineno"):
                assert segment(node) == ast.get_source_segment(code, node), (ex.id, ast.dump(node)[:80])


def test_a_file_whose_blanks_are_all_found_by_shape_skips_the_line_matcher(monkeypatch):
    ex = PACK.get("dpo-loss")
    g = Grader(PACK)
    blanks = g.blanks(ex)
    fills = {b.index: b.answer for b in blanks}
    fills[2] = "policy_rejected_logp-ref_rejected_logp"
    code = "# my notes\n" + bl.render(ex.solution_source, blanks, fills).replace("    ", "  ")

    def refuse(*a, **k):
        raise AssertionError("extract_fills ran although every blank was found by shape")

    monkeypatch.setattr(bl, "extract_fills", refuse)
    sub = g.submission(ex, code)
    assert sub.fills[2] == "policy_rejected_logp-ref_rejected_logp" and sub.located is not None
    monkeypatch.undo()
    broken = code + "\ndef oops(:\n"  # does not parse: found by lines around each blank instead
    assert g.submission(ex, broken).fills[2] == "policy_rejected_logp-ref_rejected_logp"


# -- the judging key --------------------------------------------------------------------------------
def _record(**scope):
    return {"blank": 1, "case": "c", "scope": {k: {"v": v} for k, v in scope.items()}, "value": {"v": 0}}


def test_the_judging_key_reads_what_judging_reads():
    needed = {1: frozenset({"a", "b"})}
    key = Grader._judge_key
    base = key(_record(a=1, b=2, z=3), needed)
    assert base is not None
    assert key(_record(a=1, b=2, z=4), needed) == base  # a name no fill reads is not rebuilt
    assert key(_record(a=1, b=2), needed) == base
    assert key(_record(a=1, b=3, z=3), needed) != base
    assert key(_record(a=1, z=3), needed) != base  # absent: the reference module's would be used
    rng = _record(a=1, b=2, z=3)
    rng["scope"]["__torch_rng__"] = {"v": "state"}
    assert key(rng, needed) != base
    grad = _record(a=1, b=2, z=3)
    grad["scope"]["__torch_grad__"] = {"v": False}
    assert key(grad, needed) != base
    vjp = _record(a=1, b=2, z=3)
    vjp["vjp"] = {"a": None, "z": None}
    assert key(vjp, needed) != base
    vjp_other = dict(vjp, vjp={"a": None})  # only names a fill reads count
    assert key(vjp_other, needed) == key(vjp, needed)
    statement = dict(_record(a=1, b=2, z=3), after={})
    assert key(statement, needed) != base
    other_blank = dict(_record(a=1, b=2, z=3), blank=2)
    assert key(other_blank, needed) is None and key("junk", needed) is None


# -- reuse, against the judging job -------------------------------------------------------------------
@pytest.fixture(scope="module")
def grader(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("ALIGNLINGS_HOME", str(tmp_path_factory.mktemp("home")))
    with Grader(PACK, warm=True) as g:
        yield g
    mp.undo()


def _jobs(monkeypatch) -> list[tuple[str, int]]:
    """(target, number of records sent) of every job a check starts from now on."""
    jobs: list[tuple[str, int]] = []
    real = Grader._run

    def spy(self, target, payload, exercise, *, trusted=False):
        jobs.append((target, len(payload.get("records") or ())))
        return real(self, target, payload, exercise, trusted=trusted)

    monkeypatch.setattr(Grader, "_run", spy)
    return jobs


def test_a_blank_that_sees_the_references_scope_needs_no_judging_job(grader, monkeypatch):
    ex = PACK.get("dpo-loss")
    grader.trusted(ex, 0)
    assert grader.trusted(ex, 0).judged
    jobs = _jobs(monkeypatch)
    fills = [b.answer for b in grader.blanks(ex)]
    fills[3] = "-torch.log(torch.sigmoid(margin)).mean()"
    verdict = grader.check("dpo-loss", fills=fills, run_main=False, variant=0)
    assert [t for t, _ in jobs] == [grader_module.RUN_CASES], jobs
    assert verdict["blanks"][3]["passed"] is False and verdict["blanks"][3]["misconception"] == "log-of-sigmoid"


def test_a_blank_downstream_of_a_wrong_one_is_judged_in_a_job_with_only_its_records(grader, monkeypatch):
    ex = PACK.get("dpo-loss")
    grader.trusted(ex, 0)
    jobs = _jobs(monkeypatch)
    fills = [b.answer for b in grader.blanks(ex)]
    fills[0] = "policy_chosen_logp"  # reference-free: every later scope differs from the reference's
    fills[3] = "-torch.log(torch.sigmoid(margin)).mean()"
    verdict = grader.check("dpo-loss", fills=fills, run_main=False, variant=0)
    judging = [n for t, n in jobs if t == grader_module.JUDGE_BLANKS]
    learner = [t for t, _ in jobs if t == grader_module.RUN_CASES]
    assert len(learner) == 1 and len(judging) == 1, jobs
    assert [b["misconception"] for b in verdict["blanks"]] == ["reference-free", None, None, "log-of-sigmoid"]
    cases = len(grader.trusted(ex, 0).blank_cases())
    assert 0 < judging[0] <= cases  # blank 4's records only: blank 1's scope is the reference's


def _pairs(ex):
    """Each misconception alone, and with one of another blank (the later one's scope then differs)."""
    out = [{m.blank: m} for m in ex.misconceptions]
    for m in ex.misconceptions:
        other = next((o for o in ex.misconceptions if o.blank < m.blank), None)
        if other is not None:
            out.append({other.blank: other, m.blank: m})
    return out


@pytest.mark.parametrize("exercise", ["dpo-loss", "ppo-clip", "gae", "grpo-advantages", "kl-estimators"])
def test_reuse_gives_the_verdicts_the_judging_job_gives(grader, monkeypatch, exercise):
    ex = PACK.get(exercise)
    blanks = grader.blanks(ex)
    run = grader.trusted(ex, 0)
    assert run.judged, f"{exercise}: no judgement kept with the trusted run"
    real_trusted = Grader.trusted

    def without(self, exercise_, variant=0):
        return dataclasses.replace(real_trusted(self, exercise_, variant), judged={})

    for wrong in _pairs(ex):
        fills = [wrong[b.index].fill if b.index in wrong else b.answer for b in blanks]
        reused = grader.check(exercise, fills=fills, run_main=False, quick=True, variant=0)
        monkeypatch.setattr(Grader, "trusted", without)
        judged = grader.check(exercise, fills=fills, run_main=False, quick=True, variant=0)
        monkeypatch.undo()

        def said(v):
            return json.dumps([v["passed"], [[b["passed"], b["misconception"], b["message"]] for b in v["blanks"]],
                               [[c["passed"], c["message"]] for c in v["cases"]]], sort_keys=True)

        assert said(reused) == said(judged), wrong
        if len(wrong) == 1:  # (with another wrong blank upstream, a wrong fill may give the right value there)
            (index, m), = wrong.items()
            assert reused["blanks"][index - 1]["misconception"] == m.id, (exercise, m.id)
