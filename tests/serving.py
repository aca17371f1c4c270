"""``alignlings serve`` in a subprocess on 127.0.0.1 (a free port) for the browser and load tests,
and the Chromium flags this machine needs."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage"]


@contextlib.contextmanager
def served(args: list[str], home: Path, *, start_s: float = 90.0, ready_s: float = 180.0
           ) -> Iterator[tuple[str, list[str]]]:
    """Start ``alignlings serve --port 0 --no-browser ARGS`` with ``ALIGNLINGS_HOME=home``, wait until
    it serves and its warm grader is ready, yield (base URL, the output so far and to come), stop it."""
    env = {**os.environ, "ALIGNLINGS_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-c", "from alignlings.cli.app import main; main()", "serve", "--port", "0",
           "--no-browser", *args]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "serving at" in line:
                found.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        if not found.wait(start_s):
            raise RuntimeError("the server did not start:\n" + "".join(lines))
        shown = urlsplit(re.search(r"(http://\S+)", next(x for x in lines if "serving at" in x)).group(1))
        url = f"{shown.scheme}://{shown.netloc}"  # the base: no /join, no query
        deadline = time.time() + ready_s
        while True:  # up, and the warm grader ready (it starts in the background)
            try:
                if httpx.get(f"{url}/api/health", timeout=2).json().get("grader") == "ready":
                    break
            except (httpx.HTTPError, ValueError):
                pass
            if time.time() > deadline:
                raise RuntimeError("the grader did not warm up:\n" + "".join(lines))
            time.sleep(0.3)
        yield url, lines
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
