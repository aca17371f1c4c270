"""``alignlings train toy-ppo`` and the /toy-ppo page in-process (issue 21 §5; the browser side is in
tests/test_learner_pages_browser.py), and the toy pages' shared run routes (issue 20 §3)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")
pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402
from test_learner_pages import NoGrader, _events  # noqa: E402  (the SSE parser and a grader that refuses)

from alignlings.toy_ppo import ToyPPOConfig, run_toy_ppo  # noqa: E402
from alignlings.web.app import create_app  # noqa: E402


def test_cli_progress_json_plot_and_seed(tmp_path):
    from typer.testing import CliRunner

    from alignlings.cli.app import app

    runner = CliRunner()
    out = tmp_path / "toy_ppo.png"
    result = runner.invoke(app, ["train", "toy-ppo", "--iterations", "3", "--seed", "2", "--json", "--plot", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout.strip().splitlines()[-1])
    direct = run_toy_ppo(ToyPPOConfig(seed=2, iterations=3))
    assert data["iterations"] == 3 and data["seed"] == 2
    assert data["p_target"] == direct.p_target and data["value_loss"] == direct.value_loss  # the library's run
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    plain = runner.invoke(app, ["train", "toy-ppo", "--iterations", "2"])
    assert plain.exit_code == 0, plain.output
    assert 'P("aaaa"):' in plain.stdout and "after 2 iterations" in plain.stdout and "seed 0" in plain.stdout
    assert "not reached" in plain.stdout  # two iterations are far from the target
    assert "loading torch" in plain.stderr
    bad = runner.invoke(app, ["train", "toy-ppo", "--iterations", "0"])
    assert bad.exit_code == 2 and "--iterations" in bad.output


@pytest.fixture()
def client(tmp_path):
    app = create_app(["dpo-grpo"], db_path=tmp_path / "p.sqlite3", grader=NoGrader(), warm_up=False)
    with TestClient(app) as c:
        yield c


def test_toy_ppo_run_streams_the_capstone_metrics(client):
    r = client.post("/api/toy-ppo/runs", json={"seed": 1, "iterations": 4, "delay_ms": 0})
    assert r.status_code == 201, r.text
    run = r.json()
    assert run["events"] == f"/api/toy-ppo/runs/{run['id']}/events"
    with client.stream("GET", run["events"]) as s:
        events = _events(s.read().decode())
    kinds = [k for k, _ in events]
    assert kinds[0] == "start" and kinds[-1] == "done", kinds
    points = [d for k, d in events if k == "point"]
    direct = run_toy_ppo(ToyPPOConfig(seed=1, iterations=4))
    assert [p["iteration"] for p in points] == [1, 2, 3, 4]
    assert [p["p_target"] for p in points] == direct.p_target[1:]
    assert [p["score"] for p in points] == direct.score
    assert [p["value_loss"] for p in points] == direct.value_loss
    assert [p["loss"] for p in points] == [p["policy_loss"] for p in points] == direct.policy_loss
    done = events[-1][1]
    assert done["iterations"] == 4 and done["score_final"] == pytest.approx(direct.score_final)
    assert done["p_target_initial"] == direct.p_target_initial
    # a kept run replays from Last-Event-ID
    with client.stream("GET", run["events"], headers={"Last-Event-ID": "3"}) as s:
        replay = _events(s.read().decode())
    assert replay == events[4:]
    assert [x["kind"] for x in client.get("/api/toy-ppo/runs").json()] == ["ppo"]
    assert client.get(f"/api/toy-ppo/runs/{run['id']}").json()["result"]["score_final"] == done["score_final"]
    # each kind's routes see only its runs
    assert client.get("/api/toy-grpo/runs").json() == [] and client.get("/api/toy-dpo/runs").json() == []
    assert client.get(f"/api/toy-grpo/runs/{run['id']}").status_code == 404
    assert client.get(f"/api/toy-dpo/runs/{run['id']}/events").status_code == 404
    assert client.get("/api/toy-ppo/runs/nope").status_code == 404
    for bad in [{"iterations": 0}, {"iterations": 1000}, {"seed": -1}, {"steps": 3}, {"delay_ms": 5000}]:
        assert client.post("/api/toy-ppo/runs", json=bad).status_code == 422, bad


def test_toy_ppo_refuses_a_second_run_of_the_same_learner(tmp_path):
    app = create_app(["dpo-grpo"], db_path=tmp_path / "p.sqlite3", grader=NoGrader(), warm_up=False,
                     max_toy_runs_per_learner=1)
    with TestClient(app) as c:
        first = c.post("/api/toy-ppo/runs", json={"seed": 0, "iterations": 40, "delay_ms": 200})
        assert first.status_code == 201
        second = c.post("/api/toy-dpo/runs", json={"seed": 0, "steps": 2, "delay_ms": 0})
        assert second.status_code == 429, second.text


@pytest.mark.parametrize("lang,words", [
    ("en", ["Toy PPO", "target 0.75", "target 0.90", "Losses: policy (solid), value (dashed)", "critic"]),
    ("zh", ["玩具 PPO", "目标 0.75", "目标 0.90", "损失：策略（实线）、价值（虚线）", "价值网络"]),
])
def test_toy_ppo_page_and_its_links_in_both_languages(client, lang, words):
    page = client.get(f"/toy-ppo?lang={lang}").text
    for w in words:
        assert w in page, w
    assert '"api": "/api/toy-ppo"' in page and "/static/toy_grpo.js" in page
    for canvas in ("chart-p", "chart-score", "chart-loss"):
        assert f'id="{canvas}"' in page
    assert 'href="/toy-grpo"' in page and 'href="/toy-dpo"' in page and 'href="/exercises/toy-ppo"' in page
    for other in ("/toy-grpo", "/toy-dpo", "/"):
        assert 'href="/toy-ppo"' in client.get(f"{other}?lang={lang}").text, other
    ex = client.get(f"/exercises/toy-ppo?lang={lang}")
    assert ex.status_code == 200 and 'id="toy-ppo-live"' in ex.text
    assert 'id="toy-ppo-live"' not in client.get(f"/exercises/toy-dpo?lang={lang}").text
