"""Load check: 20 concurrent check requests against a real `alignlings` web server on loopback.

The server runs in its own process (uvicorn, the real app and the engine's warm grader, a fresh
progress store). A client sends N requests to ``POST /api/exercises/dpo-loss/check`` at once: half
the correct fills, half with a known misconception in one blank. Every answer is verified: the
right ``passed`` value and, for the wrong ones, the named misconception on the right blank.

Two phases:
1. "admitted": the server's queue holds all N (``max_queue`` = N): no request may be refused.
2. "default queue": the app's defaults (2 running, 8 waiting); the requests that find the queue
   full get 429 at once and retry after the ``Retry-After`` the server sends, as the page does.
   None may be lost: each ends with its correct verdict.

Usage: python benchmarks/bench_web_load.py [--requests 20] [--concurrent 2] [--pack DIR]
Reports (never asserts, but exits 1 if an answer is wrong or missing): p50/p95/max latency per
request, wall time, 429 counts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import httpx

SERVER = r'''
import sys, uvicorn
from alignlings.web.app import create_app
pack, db = sys.argv[1] or None, sys.argv[2]
port, concurrent, queue = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
app = create_app(pack, db_path=db, max_concurrent_checks=concurrent, max_queue=queue)
uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(pack: str | None, home: str, concurrent: int, queue: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    db = os.path.join(home, f"progress-{port}.sqlite3")
    proc = subprocess.Popen([sys.executable, "-c", SERVER, pack or "", db, str(port), str(concurrent), str(queue)],
                            env={**os.environ, "ALIGNLINGS_HOME": home})
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while time.time() < deadline:
        try:
            if httpx.get(f"{url}/api/health", timeout=2).json().get("grader") == "ready":
                return proc, url
        except (httpx.HTTPError, ValueError):
            pass
        if proc.poll() is not None:
            raise SystemExit("the server exited during startup")
        time.sleep(0.3)
    proc.terminate()
    raise SystemExit("the server did not become ready in 180 s")


def requests_for(pack_path: str | None, n: int) -> list[tuple[list[str], dict]]:
    """(fills, expectation) pairs: half correct, half with a misconception in blank 3."""
    from alignlings.content import blanks as bl
    from alignlings.content.pack import load_pack

    ex = load_pack(pack_path).get("dpo-loss")
    answers = [b.answer for b in bl.find_blanks(ex.solution_source)]
    m = next(m for m in ex.misconceptions if m.blank == 3)
    wrong = list(answers)
    wrong[2] = m.fill
    out = []
    for i in range(n):
        if i % 2 == 0:
            out.append((answers, {"passed": True}))
        else:
            out.append((wrong, {"passed": False, "blank": 3, "misconception": m.id}))
    return out


def verify(verdict: dict, expect: dict) -> str | None:
    if verdict.get("passed") is not expect["passed"]:
        return f"passed={verdict.get('passed')} expected {expect['passed']} (error: {verdict.get('error')})"
    if not expect["passed"]:
        b = verdict["blanks"][expect["blank"] - 1]
        if b["passed"] is not False or b["misconception"] != expect["misconception"]:
            return f"blank {expect['blank']}: {b}"
    return None


async def one(client: httpx.AsyncClient, url: str, fills: list[str], expect: dict, retry: bool) -> dict:
    started = time.perf_counter()
    refused = 0
    while True:
        r = await client.post(f"{url}/api/exercises/dpo-loss/check", json={"fills": fills})
        if r.status_code == 429 and retry and refused < 30:
            refused += 1
            await asyncio.sleep(float(r.headers.get("retry-after", "1")))
            continue
        break
    seconds = time.perf_counter() - started
    problem = verify(r.json(), expect) if r.status_code == 200 else f"HTTP {r.status_code}: {r.text[:200]}"
    return {"seconds": seconds, "status": r.status_code, "refused": refused, "problem": problem}


async def burst(url: str, reqs, retry: bool) -> tuple[list[dict], float]:
    limits = httpx.Limits(max_connections=len(reqs) + 4)
    async with httpx.AsyncClient(timeout=300, limits=limits) as client:
        started = time.perf_counter()
        results = await asyncio.gather(*(one(client, url, f, e, retry) for f, e in reqs))
        return results, time.perf_counter() - started


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q / 100 * (len(values) - 1))))]


def report(name: str, results: list[dict], wall: float) -> bool:
    secs = [r["seconds"] for r in results]
    bad = [r for r in results if r["problem"]]
    print(f"{name}: {len(results)} requests, {len(results) - len(bad)} answered correctly, {len(bad)} wrong or lost")
    print(f"  latency p50 {statistics.median(secs):.2f} s  p95 {pct(secs, 95):.2f} s  max {max(secs):.2f} s;"
          f"  wall {wall:.2f} s  ({len(results) / wall:.1f} checks/s)")
    print(f"  refused with 429 first: {sum(1 for r in results if r['refused'])} requests, "
          f"{sum(r['refused'] for r in results)} refusals in all")
    for r in bad[:5]:
        print("  problem:", r["problem"])
    return not bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--concurrent", type=int, default=2, help="gradings the server runs at once (default 2)")
    ap.add_argument("--pack", default=None)
    args = ap.parse_args()
    reqs = requests_for(args.pack, args.requests)
    ok = True
    with tempfile.TemporaryDirectory() as home:
        for name, queue, retry in [("admitted (queue holds all)", args.requests, False),
                                   ("default queue (8 waiting), client retries on 429", 8, True)]:
            proc, url = start_server(args.pack, home, args.concurrent, queue)
            try:
                asyncio.run(burst(url, reqs[:2], retry))  # warm the path (first fork, imports)
                results, wall = asyncio.run(burst(url, reqs, retry))
                ok &= report(name, results, wall)
                print("  server after the burst:", json.dumps(httpx.get(f"{url}/api/health").json()["checks"]))
            finally:
                proc.terminate()
                proc.wait(15)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
