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
from alignlings.practice.pack import load_pack  # noqa: E402
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
