"""Issue 33 (Major 3): a check that runs away can be stopped. While a check runs the page shows
"Stop" and the elapsed time; Stop ends the check's sandbox jobs at once (``sandbox.STOP``), the
check answers "stopped" and nothing is recorded. ``alignlings watch`` stops the previous check
when the file is saved again and checks the new version.
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from alignlings.grading.sandbox import STOP, Limits, WarmSandbox, run_job

TESTS = str(Path(__file__).resolve().parent)


def _stopped_after_start(run) -> object:
    """Run ``run()`` in a thread whose STOP event a timer sets after 0.5 s."""
    stop, box = threading.Event(), {}

    def work():
        STOP.set(stop)
        try:
            box["result"] = run()
        except BaseException as exc:  # noqa: BLE001 - raised again below, in the test's thread
            box["error"] = exc

    t = threading.Thread(target=work)
    t.start()
    threading.Timer(0.5, stop.set).start()
    t.join(120)
    if "error" in box:
        raise box["error"]
    assert "result" in box, "the check did not answer within 120 s of its Stop"
    return box["result"]


@pytest.mark.parametrize("path", ["cold", "warm"])
def test_stop_ends_a_running_job(path):
    limits = Limits(wall_seconds=90, cpu_seconds=90)
    if path == "warm":
        with WarmSandbox(preload=[], extra_pythonpath=[TESTS]) as sandbox:
            result = _stopped_after_start(lambda: sandbox.run("sandbox_targets:spin", {}, limits=limits))
    else:
        result = _stopped_after_start(lambda: run_job("sandbox_targets:spin", {}, limits=limits,
                                                      extra_pythonpath=[TESTS]))
    assert not result.ok and result.error_kind == "stopped", result
    assert result.error_message == "the check was stopped before it finished"


def test_a_job_without_a_stop_is_not_stopped():
    result = run_job("sandbox_targets:sleep_then_return", {"seconds": 0.5}, limits=Limits(wall_seconds=60),
                     extra_pythonpath=[TESTS])
    assert result.ok, result


# -- the web page's Stop ------------------------------------------------------------------------------

pytest.importorskip("fastapi")
pytest.importorskip("httpx")


class _BlockingGrader:
    """Answers a check only once its STOP event is set (as the sandbox would end its jobs)."""

    def __init__(self, pack):
        self.pack, self.started = pack, threading.Event()

    def check(self, exercise_id, code=None, *, fills=None, lang="en", run_main=True, quick=False):
        stop = STOP.get()
        assert stop is not None, "the check route did not give this check a Stop"
        self.started.set()
        assert stop.wait(60), "nobody pressed Stop"
        from alignlings.grading.grader import msg

        return {"exercise": exercise_id, "passed": False, "blanks": [], "cases": [], "stdout": "",
                "error": {"kind": "stopped", "message": msg("stopped", lang)},
                "isolation": "fake", "seconds": 0.0}

    def submission(self, exercise, code=None, fills=None):
        return SimpleNamespace(code="# stopped")

    def close(self):
        pass


def test_the_stop_route_ends_the_learners_check_and_nothing_is_recorded(tmp_path):
    from fastapi.testclient import TestClient

    from alignlings.content import blanks as bl
    from alignlings.content.pack import load_pack
    from alignlings.web.app import create_app

    pack = load_pack()
    ex = pack.get("dpo-loss")
    fills = [b.answer for b in bl.find_blanks(ex.solution_source)]
    grader = _BlockingGrader(pack)
    app = create_app(db_path=tmp_path / "p.sqlite3", grader=grader, warm_up=False, warm_references=False)
    with TestClient(app) as c:
        box: dict = {}
        t = threading.Thread(target=lambda: box.update(r=c.post("/api/exercises/dpo-loss/check",
                                                                  json={"fills": fills})))
        t.start()
        assert grader.started.wait(60)
        assert c.post("/api/exercises/grpo-loss/stop").json()["stopped"] == 0  # another exercise's: none
        assert c.post("/api/exercises/dpo-loss/stop").json() == {"exercise": "dpo-loss", "stopped": 1}
        t.join(60)
        verdict = box["r"].json()
        assert box["r"].status_code == 200 and verdict["error"]["kind"] == "stopped", verdict
        row = next(r for r in c.get("/api/progress").json()["exercises"] if r["key"] == "dpo-loss")
        assert row["attempts"] == 0  # a stopped check is not an attempt
        assert c.post("/api/exercises/dpo-loss/stop").json()["stopped"] == 0  # nothing left running


def test_a_runaway_fill_is_stopped_through_the_real_grader(tmp_path, monkeypatch):
    """The engine end to end: a fill that never returns, Stop pressed, the verdict says stopped."""
    from alignlings.content import blanks as bl
    from alignlings.grading.grader import Grader
    from alignlings.content.pack import load_pack

    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    pack = load_pack()
    ex = pack.get("dpo-loss")
    fills = [b.answer for b in bl.find_blanks(ex.solution_source)]
    fills[0] = "next(x for x in iter(int, 1) if x)"  # runs forever, allocates nothing
    with Grader(pack, warm=True) as grader:
        grader.trusted(ex)  # the reference values first: a Stop never ends those
        verdict = _stopped_after_start(lambda: grader.check("dpo-loss", fills=fills))
    assert verdict["error"] and verdict["error"]["kind"] == "stopped", verdict
    assert verdict["error"]["message"] == "stopped before it finished: nothing was graded"


# -- watch ------------------------------------------------------------------------------------------

def test_watch_stops_the_previous_check_when_the_file_is_saved_again(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from alignlings.cli.app import app as cli
    from alignlings.grading import grader as gr
    from alignlings.grading.grader import template_for
    from alignlings.content.pack import load_pack

    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    ex = load_pack().get("dpo-loss")
    path = tmp_path / "dpo_loss.py"
    path.write_text(template_for(ex), encoding="utf-8")
    checks: list[dict] = []

    class Watched(_BlockingGrader):
        def __init__(self, pack, warm=False, **kw):
            super().__init__(pack)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        def check(self, exercise_id, code=None, **kw):
            checks.append({"code": code, "stop": STOP.get()})
            if len(checks) == 1:  # the first check runs away; the learner saves a new version
                path.write_text(code + "\n# saved again\n", encoding="utf-8")
                return super().check(exercise_id, code, **kw)
            return {"exercise": exercise_id, "passed": True, "blanks": [], "cases": [], "stdout": "",
                    "error": None, "isolation": "fake", "seconds": 0.0}

    monkeypatch.setattr(gr, "Grader", Watched)
    r = CliRunner().invoke(cli, ["--lang", "en", "watch", "dpo-loss", str(path), "--manual"], input="")
    assert r.exit_code == 0, r.output
    assert len(checks) == 2 and checks[0]["stop"].is_set() and not checks[1]["stop"].is_set()
    assert checks[1]["code"].endswith("# saved again\n")
    assert "Saved again while checking: that check was stopped" in r.output
