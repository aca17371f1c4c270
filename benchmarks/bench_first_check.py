"""The first check of every exercise on a fresh server, with and without the reference warm-up.

A code exercise's first check needs the reference's values (``Grader.trusted``: a sandboxed run
of pack code, then cached on disk). Without the warm-up the first check computes them (10-24 s
for toy-dpo on a 2-core machine); with it (``alignlings.web.references``, on by default) the
server computes every exercise's values in the background from startup.

Each configuration starts a real server (uvicorn, the warm grader) with a fresh $ALIGNLINGS_HOME
(no cached values), waits until the grader is ready, then checks each exercise once, in course
order, the right answer (fills for a fill-in, the fixed file for a bug drill), back to back: the
worst case for the warm-up, which may still be computing when a check arrives.

Configurations (one run measures them side by side):
- "before": ``ALIGNLINGS_WARM_REFERENCES=0`` (the flag ``--no-warm-up`` runs this one only);
- "after": the warm-up on, checks start as soon as the grader is ready;
- "after, warm": the warm-up on, checks start once it has finished (a learner who reads the first
  statement for as long as the warm-up takes).

Usage: python benchmarks/bench_first_check.py [--limit N] [--no-warm-up] [--pack DIR] [--json PATH]
Reports (never asserts; exits 1 if a right answer does not pass): per configuration the latency
of each first check, p50 and max, and how long the warm-up took.
"""

from __future__ import annotations

import argparse
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
pack, db, port = sys.argv[1] or None, sys.argv[2], int(sys.argv[3])
app = create_app(pack, db_path=db)
uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(pack: str | None, home: str, warm: bool) -> tuple[subprocess.Popen, str, float]:
    port = free_port()
    env = {**os.environ, "ALIGNLINGS_HOME": home, "ALIGNLINGS_WARM_REFERENCES": "1" if warm else "0"}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", SERVER, pack or "", os.path.join(home, "p.sqlite3"), str(port)],
                            env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 300
    while time.time() < deadline:
        try:
            if httpx.get(f"{url}/api/health", timeout=2).json().get("grader") == "ready":
                return proc, url, started
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.2)
    proc.terminate()
    raise SystemExit("the server did not become ready in 300 s")


def submissions(pack_path: str | None, limit: int | None) -> list[tuple[str, dict]]:
    """(key, body) of the right answer of each code exercise, in course order."""
    from alignlings.content import blanks as bl
    from alignlings.content.pack import load_pack

    out = []
    for ex in load_pack(pack_path):
        if not ex.kind_spec.graded_as_file:
            continue
        if ex.kind_spec.starts_from_buggy_file:
            body = {"code": ex.solution_source}
        else:
            body = {"fills": [b.answer for b in bl.find_blanks(ex.solution_source)]}
        out.append((ex.key, body))
    return out[:limit] if limit else out


def wait_warm(url: str, started: float) -> float:
    while True:
        s = httpx.get(f"{url}/api/references", timeout=10).json()
        if not s["enabled"] or s["done"] >= s["total"]:
            return time.perf_counter() - started
        time.sleep(0.2)


def run(name: str, pack: str | None, subs: list[tuple[str, dict]], *, warm: bool, wait: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="alignlings-first-check-") as home:
        proc, url, started = start_server(pack, home, warm)
        try:
            ready = time.perf_counter() - started
            warm_s = wait_warm(url, started) if wait else None
            times, failed = {}, []
            with httpx.Client(base_url=url, timeout=600) as client:
                for key, body in subs:
                    t0 = time.perf_counter()
                    r = client.post(f"/api/exercises/{key}/check", json=body)
                    times[key] = time.perf_counter() - t0
                    if r.status_code != 200 or r.json().get("passed") is not True:
                        failed.append(f"{key}: {r.status_code} {r.text[:300]}")
                    print(f"  {name:12s} {key:40s} {times[key]:6.2f} s", flush=True)
            if warm and warm_s is None:
                warm_s = wait_warm(url, started)
        finally:
            proc.terminate()
            proc.wait(30)
    vals = list(times.values())
    return {"name": name, "grader_ready_s": round(ready, 2), "warm_up_s": None if warm_s is None else round(warm_s, 2),
            "p50_s": round(statistics.median(vals), 3), "max_s": round(max(vals), 3),
            "slowest": max(times, key=times.get), "times": {k: round(v, 3) for k, v in times.items()}, "failed": failed}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pack", default=None, help="exercise pack folder (default: the built-in course)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N code exercises")
    ap.add_argument("--no-warm-up", action="store_true", help="run only the configuration without the warm-up")
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args()
    if args.limit is not None and args.limit < 1:
        ap.error(f"--limit: expected an int >= 1, got {args.limit}")
    subs = submissions(args.pack, args.limit)
    configs = [("before", False, False)] if args.no_warm_up else [
        ("before", False, False), ("after", True, False), ("after, warm", True, True)]
    results = [run(name, args.pack, subs, warm=warm, wait=wait) for name, warm, wait in configs]
    print(f"\nfirst check of {len(subs)} exercises on a fresh server (cold cache), {os.cpu_count()} CPUs")
    print(f"{'configuration':14s} {'p50 (s)':>8s} {'max (s)':>8s}  {'slowest':28s} {'warm-up done at (s)':>20s}")
    for r in results:
        print(f"{r['name']:14s} {r['p50_s']:8.2f} {r['max_s']:8.2f}  {r['slowest']:28s} "
              f"{'' if r['warm_up_s'] is None else r['warm_up_s']:>20}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    failed = [f for r in results for f in r["failed"]]
    for f in failed:
        print("FAILED", f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
