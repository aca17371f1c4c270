"""Load on a real ``serve --classroom`` over loopback HTTP, on SQLite and on PostgreSQL: 100 learners
join and each takes two hints, answers the concepts quiz and runs one check (through the real warm
grader), from a bounded pool of client threads within a bounded time. Nothing is lost (the teacher's
CSV counts every learner's attempts and hints, the misconception hit by half the class) and no
request gets a 5xx; a full grading queue answers 429, which the learner's client retries as the
page does. On PostgreSQL the server keeps within its connection pool (``ALIGNLINGS_DB_POOL_SIZE``)."""

from __future__ import annotations

import csv
import io
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

httpx = pytest.importorskip("httpx")

from classroom_server import CODE, PG_SKIP, PG_URL, TEACHER, classroom_server  # noqa: E402

from alignlings.content import blanks as bl  # noqa: E402
from alignlings.practice import store as pr  # noqa: E402
from alignlings.content.pack import load_pack  # noqa: E402

pytestmark = pytest.mark.slow

LEARNERS, CLIENT_THREADS, BUDGET_S = 100, 12, 420
PACK = load_pack()
EX = PACK.get("dpo-loss")
QUIZ = PACK.get("concepts").quiz
RIGHT = [b.answer for b in bl.find_blanks(EX.solution_source)]
MISC = EX.misconceptions[0]
WRONG = [MISC.fill if b.index == MISC.blank else b.answer for b in bl.find_blanks(EX.solution_source)]


def learner(url: str, i: int, deadline: float) -> dict:
    """One learner's session; returns the status of every request it made."""
    statuses: list[int] = []
    with httpx.Client(base_url=url, timeout=120, headers={"Origin": url}) as c:
        def call(method: str, path: str, **kw) -> httpx.Response:
            while True:
                r = c.request(method, path, **kw)
                statuses.append(r.status_code)
                if r.status_code != 429 or time.monotonic() > deadline:
                    return r
                time.sleep(float(r.headers.get("retry-after", "1")))  # the queue is full: wait as told

        assert call("POST", "/api/join", json={"name": f"learner {i:03d}", "code": CODE}).status_code == 200
        for _ in range(2):
            assert call("POST", "/api/exercises/dpo-loss/hint", json={}).status_code == 200
        for q in QUIZ:
            assert call("POST", f"/api/quiz/{q.id}", json={"choice": q.answer}).status_code == 200
        r = call("POST", "/api/exercises/dpo-loss/check", json={"fills": RIGHT if i % 2 else WRONG})
        assert r.status_code == 200, r.text
        assert r.json()["passed"] is bool(i % 2)
    return {"statuses": statuses}


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.skipif(
    not PG_URL, reason=PG_SKIP))])
def test_a_hundred_learners_over_http_lose_nothing(backend, tmp_path):
    with classroom_server(backend, tmp_path) as url:
        started = time.monotonic()
        deadline = started + BUDGET_S
        with ThreadPoolExecutor(max_workers=CLIENT_THREADS) as pool:
            futures = [pool.submit(learner, url, i, deadline) for i in range(LEARNERS)]
            results = [f.result(timeout=max(1.0, deadline - time.monotonic())) for f in futures]
        elapsed = time.monotonic() - started
        statuses = [s for r in results for s in r["statuses"]]
        assert not [s for s in statuses if s >= 500], "server errors under load"
        assert set(statuses) <= {200, 429}, sorted(set(statuses))
        assert elapsed < BUDGET_S

        auth = {"Authorization": f"Bearer {TEACHER}"}
        progress = list(csv.DictReader(io.StringIO(httpx.get(f"{url}/teacher/progress.csv", headers=auth).text)))
        dpo = {r["name"]: r for r in progress if r["exercise"] == "dpo-loss"}
        concepts = {r["name"]: r for r in progress if r["exercise"] == "concepts"}
        assert len(dpo) == len(concepts) == LEARNERS
        assert all(r["attempts"] == "1" and r["hints"] == "2" for r in dpo.values())
        assert sum(r["status"] == "solved" for r in dpo.values()) == LEARNERS // 2
        assert all(r["attempts"] == "1" and r["status"] == "solved" for r in concepts.values())  # one whole round
        misc = list(csv.DictReader(io.StringIO(httpx.get(f"{url}/teacher/misconceptions.csv", headers=auth).text)))
        hit = {r["misconception"]: r for r in misc}
        assert hit[MISC.id]["learners"] == str(LEARNERS // 2)

        if backend == "postgresql":  # one server process stays within its pool, whatever its thread count
            import psycopg

            with psycopg.connect(PG_URL) as db:
                (n,) = db.execute("SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
                                  "AND pid <> pg_backend_pid()").fetchone()
            assert 1 <= n <= pr.postgres.PG_POOL_SIZE
        print(f"{backend}: {LEARNERS} learners, {len(statuses)} requests ({statuses.count(429)} queue-full "
              f"retries) in {elapsed:.1f}s")
