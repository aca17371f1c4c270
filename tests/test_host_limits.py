"""Issue 29 §4, one person, one machine, one host: per-address limits count the connection's own
address, and X-Forwarded-For is believed only from a proxy the operator named (``serve
--trusted-proxy``). Seen: 25 of 25 joins through a changing header on a loopback server, because
uvicorn trusts forwarding headers from 127.0.0.1 by default.

The server here is the real uvicorn with the settings ``alignlings serve`` uses, on a free loopback
port, serving a class with a stand-in grader (joining grades nothing).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")

from typer.testing import CliRunner  # noqa: E402

from alignlings.cli.app import app as cli  # noqa: E402
from alignlings.cli.serve import server_config, trusted_proxies  # noqa: E402
from alignlings.content.pack import load_pack  # noqa: E402
from alignlings.web.app import create_app  # noqa: E402

CODE = "PRXY2345"


class NoGrader:
    def __init__(self, pack):
        self.pack = pack

    def close(self):
        pass


@contextlib.contextmanager
def class_server(tmp_path, proxies: list[str]):
    web = create_app(db_path=tmp_path / "class.sqlite3", token="t" * 20, classroom=True, class_code=CODE,
                     grader=NoGrader(load_pack()), warm_up=False, warm_references=False, max_joins_per_address=3)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(server_config(web, proxies))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(15)


def joins(url: str, n: int) -> list[int]:
    """n joins, each claiming another address in X-Forwarded-For (and X-Real-IP, Forwarded)."""
    out = []
    with httpx.Client() as c:
        for i in range(n):
            fake = f"198.51.100.{i + 1}"
            r = c.post(f"{url}/api/join", json={"name": f"n{i}", "code": CODE},
                       headers={"X-Forwarded-For": fake, "X-Real-IP": fake, "Forwarded": f"for={fake}"})
            out.append(r.status_code)
    return out


def test_forwarding_headers_from_anyone_do_not_change_the_address(tmp_path):
    with class_server(tmp_path, []) as url:
        assert joins(url, 6) == [200, 200, 200, 429, 429, 429]


def test_a_named_proxy_may_say_whose_request_it_forwards(tmp_path):
    with class_server(tmp_path, trusted_proxies(["127.0.0.1"])) as url:
        assert joins(url, 6) == [200] * 6  # six learners behind one proxy, each counted apart


def test_a_proxy_that_is_not_named_is_not_believed(tmp_path):
    with class_server(tmp_path, trusted_proxies(["10.0.0.0/8"])) as url:
        assert joins(url, 4) == [200, 200, 200, 429]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_bad_trusted_proxy_is_a_usage_error(lang):
    r = CliRunner().invoke(cli, ["--lang", lang, "serve", "--no-browser", "--trusted-proxy", "not-an-ip"])
    assert r.exit_code == 2
    assert "--trusted-proxy" in r.output and "not-an-ip" in r.output
    assert ("10.0.0.0/24" in r.output) and (("IP 地址" in r.output) if lang == "zh" else ("IP address" in r.output))


# -- the home folder is its user's alone ----------------------------------------------------------

def _mode(path) -> int:
    import stat

    return stat.S_IMODE(path.stat().st_mode)


def _cli(home, *args, umask: int = 0o022):
    import os
    import subprocess
    import sys

    env = {**os.environ, "ALIGNLINGS_HOME": str(home), "ALIGNLINGS_LANG": "en"}
    return subprocess.run([sys.executable, "-c", f"import os; os.umask({umask}); "
                           "from alignlings.cli.app import main; main()", *args],
                          env=env, capture_output=True, text=True, timeout=300)


def test_a_new_home_and_its_store_are_private_whatever_the_umask(tmp_path):
    """Seen: another local user read the class database (learners' code, the class code)."""
    home = tmp_path / "home"
    r = _cli(home, "progress")
    assert r.returncode == 0, r.stderr
    db = home / "progress.sqlite3"
    assert db.exists() and _mode(home) == 0o700 and _mode(db) == 0o600
    for p in home.rglob("*"):
        assert _mode(p) & 0o077 == 0, (p, oct(_mode(p)))
    assert "readable by you alone" not in r.stderr  # nothing needed tightening


def test_an_existing_home_readable_by_others_is_tightened_with_a_notice(tmp_path):
    import os

    home = tmp_path / "home"
    assert _cli(home, "progress", umask=0o022).returncode == 0
    cache = home / "cache" / "expected"
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "x.json").write_text("{}")
    for p in [home, *home.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    r = _cli(home, "progress")
    assert r.returncode == 0, r.stderr
    assert "readable by you alone" in r.stderr
    assert _mode(home) == 0o700 and _mode(home / "progress.sqlite3") == 0o600
    assert _mode(cache) == 0o700 and _mode(cache / "x.json") == 0o600
    assert "readable by you alone" not in _cli(home, "progress").stderr  # once


def test_a_class_server_store_elsewhere_is_made_private(tmp_path):
    import os

    db = tmp_path / "class" / "class.sqlite3"
    db.parent.mkdir()
    os.chmod(db.parent, 0o755)  # a folder the operator chose: left as it is
    create_app(db_path=db, token="t" * 20, classroom=True, class_code=CODE, grader=NoGrader(load_pack()),
               warm_up=False, warm_references=False)
    os.chmod(db, 0o644)
    create_app(db_path=db, token="t" * 20, classroom=True, class_code=CODE, grader=NoGrader(load_pack()),
               warm_up=False, warm_references=False)
    assert _mode(db) == 0o600
    assert _mode(db.parent) == 0o755


# -- predict runs share the grading queue ---------------------------------------------------------

PREDICT = next(ex for ex in load_pack() if ex.kind_spec.name == "predict")


class _SlowRuns:
    """Stands in for the variant's process: each run waits until the test lets it go."""

    def __init__(self):
        self.go, self.started = threading.Event(), threading.Semaphore(0)
        self.lock, self.running, self.most, self.calls = threading.Lock(), 0, 0, 0

    def __call__(self, ex, q, *, timeout=None, use_cache=True):
        from alignlings.content import predictions as pr

        with self.lock:
            self.calls += 1
            self.running += 1
            self.most = max(self.most, self.running)
        self.started.release()
        try:
            assert self.go.wait(60), "the test never let the run go"
            return pr.Run({"x": 1.0}, {"s": [1.0, 2.0]}, q.answer, None, False, 0.0)
        finally:
            with self.lock:
                self.running -= 1


def test_predict_runs_go_through_the_queue_one_per_learner(tmp_path, monkeypatch):
    """Seen: six concurrent variant runs from one learner on a cold server."""
    from fastapi.testclient import TestClient

    from alignlings.content import predictions as pr

    runs = _SlowRuns()
    monkeypatch.setattr(pr, "run_variant", runs)
    web = create_app(db_path=tmp_path / "p.sqlite3", grader=NoGrader(load_pack()), warm_up=False,
                     warm_references=False, max_concurrent_checks=1, max_checks_per_client=4)
    questions = [q.id for q in PREDICT.predict]
    with TestClient(web) as c:
        first: dict = {}
        t = threading.Thread(target=lambda: first.update(r=c.post(f"/api/predict/{PREDICT.key}/{questions[0]}",
                                                                   json={"choice": 0})))
        t.start()
        assert runs.started.acquire(timeout=60)
        again = [c.post(f"/api/predict/{PREDICT.key}/{q}", json={"choice": 0}) for q in questions * 3]
        form = c.post(f"/exercises/{PREDICT.key}/predict", content=f"question={questions[0]}&choice=0",
                      headers={"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "same-origin"})
        assert [r.status_code for r in again] == [429] * len(again) and form.status_code == 429
        assert web.state.ctx.check_queue.stats()["running"] == 1  # it holds a grading slot
        runs.go.set()
        t.join(60)
        assert first["r"].status_code == 200, first["r"].text
        assert c.post(f"/api/predict/{PREDICT.key}/{questions[0]}", json={"choice": 0}).status_code == 200
    assert runs.calls == 2 and runs.most == 1


def test_one_variant_runs_once_however_many_ask(tmp_path, monkeypatch):
    from alignlings.content import predictions as pr

    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    runs = _SlowRuns()

    def child(ex, q, path, timeout):
        run = runs(ex, q)
        pr._write_cache(path, run)
        return run

    monkeypatch.setattr(pr, "_run_variant", child)
    q = PREDICT.predict[0]
    out: list = []
    threads = [threading.Thread(target=lambda: out.append(pr.run_variant(PREDICT, q))) for _ in range(6)]
    for t in threads:
        t.start()
    assert runs.started.acquire(timeout=60)
    runs.go.set()
    for t in threads:
        t.join(60)
    assert len(out) == 6 and runs.calls == 1 and sum(r.cached for r in out) == 5


def test_the_server_warm_up_runs_the_predict_variants(monkeypatch):
    from types import SimpleNamespace

    from alignlings.content import predictions as pr
    from alignlings.web import references

    pack = load_pack()
    ran: list[tuple[str, str]] = []
    monkeypatch.setattr(pr, "run_variant", lambda ex, q, **kw: ran.append((ex.key, q.id)))
    context = SimpleNamespace(pack=pack, grader=lambda: SimpleNamespace(trusted=lambda ex: None))
    warmup = references.ReferenceWarmup(references.code_exercise_keys(pack))
    warmup.run(context)
    expected = [(ex.key, q.id) for ex in pack if ex.kind_spec.name == "predict" for q in ex.predict]
    assert expected and ran == expected


def test_the_sandbox_job_trees_stay_readable_by_the_jobs(tmp_path, monkeypatch):
    """A job tree (tree-*/jobtree-*) in the cache folder is read by the jobs' own uids through a
    bind mount: making it 0600 would break every running server's jobs. Only the caches close."""
    import os

    from alignlings.practice.private import tighten

    monkeypatch.delenv("ALIGNLINGS_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "c"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "d"))
    cache = tmp_path / "c" / "alignlings"
    tree = cache / "tree-123-abc" / "jobtree-0f" / "alignlings"
    tree.mkdir(parents=True)
    (tree / "__init__.py").write_text("")
    (cache / "expected").mkdir()
    (cache / "expected" / "dpo-loss-x.json").write_text("{}")
    (tmp_path / "d" / "alignlings").mkdir(parents=True)
    (tmp_path / "d" / "alignlings" / "progress.sqlite3").write_text("")
    for p in [tmp_path / "c", tmp_path / "d", *(tmp_path / "c").rglob("*"), *(tmp_path / "d").rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    os.chmod(cache / "tree-123-abc", 0o700)  # as the sandbox makes it
    changed = tighten()
    assert _mode(cache) == 0o700 and _mode(cache / "expected" / "dpo-loss-x.json") == 0o600
    assert _mode(tmp_path / "d" / "alignlings") == 0o700
    assert _mode(tmp_path / "d" / "alignlings" / "progress.sqlite3") == 0o600
    assert _mode(tree) == 0o755 and _mode(tree / "__init__.py") == 0o644
    assert not [c for c in changed if "tree-123" in c]
