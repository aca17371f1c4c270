"""``alignlings serve``: the web practice app on this machine (http://127.0.0.1:8765 by default).

A thin layer over :func:`alignlings.web.app.create_app`. It binds 127.0.0.1 unless told otherwise;
``--host 0.0.0.0`` (a classroom) without ``--token`` generates a token and prints the URL that
carries it, because every request without the token is refused. Such a shared server does not
import progress unless started with ``--allow-import``.

Learner code is graded in Linux namespaces (``alignlings.grading.sandbox``), as root or as a normal
user. Where they cannot be made, a class or a server on a non-loopback address refuses to start
and says what is missing, unless ``--allow-unisolated`` is given; then every page says so.

``--classroom``: a class on one server (``alignlings.web.classroom``). Learners join at ``/join``
with their name and the class code printed here, each with their own progress; the token is the
teacher's (``/teacher``), generated when not given. The class (its code and learners) is kept in
the progress database, so a restart without ``--class-code`` keeps the same code. torch, FastAPI and uvicorn are
imported inside the command so that ``alignlings --help`` stays fast.

Per-address limits (checks, joins) count the connection's own address. ``--trusted-proxy ADDR``
names a reverse proxy whose ``X-Forwarded-For`` is believed; from anyone else it is ignored.
"""

from __future__ import annotations

import secrets
import threading
from typing import Annotated

import typer

from alignlings import i18n
from alignlings.cli.common import LangOption, PackOption, UsageError, given_packs, pack_error_text, resolve_lang

MSG = i18n.lang_table("cli.serve")  # strings: locales/{en,zh}.toml [cli.serve]

LOOPBACK = ("127.0.0.1", "localhost", "::1")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")


def _url(host: str, port: int, token: str | None) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    shown = f"[{shown}]" if ":" in shown else shown
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


def _lan_address() -> str | None:
    """This machine's address on its local network (a UDP "connect" sends no packet)."""
    import socket

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            address = s.getsockname()[0]
    except OSError:
        return None
    return None if address.startswith("127.") else address


def trusted_proxies(given: list[str], lang: str = "en") -> list[str]:
    """``--trusted-proxy`` values as IP addresses or networks (a UsageError names a bad one)."""
    import ipaddress

    out = []
    for text in given:
        try:
            out.append(str(ipaddress.ip_network(text.strip(), strict=False)))
        except ValueError:
            raise UsageError("trusted_proxy", "--trusted-proxy", lang=lang, got=text[:60]) from None
    return out


def server_config(web, proxies: list[str]):
    """uvicorn's settings for ``serve``. Forwarding headers (X-Forwarded-For, -Proto) are read only
    from the proxies the operator named; uvicorn's default would trust them from 127.0.0.1, so
    anyone on a loopback server could pick the address each request is counted under."""
    import uvicorn

    return uvicorn.Config(web, log_level="warning", timeout_graceful_shutdown=3, proxy_headers=bool(proxies),
                          forwarded_allow_ips=list(proxies) if proxies else [])


def _check_isolation(*, shared: bool, allow_unisolated: bool, lang: str = "en") -> bool:
    """Whether this server will grade without isolation (True: say so on every page). A class or a
    server others can reach refuses to start unless ``--allow-unisolated``; on loopback, a warning."""
    from alignlings.grading import sandbox

    isolated, how = sandbox.warm_isolation()
    if isolated:
        if allow_unisolated:
            typer.echo(MSG[lang]["isolated_anyway"])
        return False
    if shared and not allow_unisolated:
        typer.echo(MSG[lang]["refuse"].format(how=i18n.reword("practice.isolation", how, lang),
                                              missing=i18n.reword("practice.isolation", sandbox.MISSING_ISOLATION, lang)),
                   err=True)
        raise typer.Exit(2)
    typer.echo(MSG[lang]["unisolated"].format(how=i18n.reword("practice.isolation", how, lang)), err=True)
    return allow_unisolated


def serve(
    host: Annotated[str, typer.Option(
        "--host", help="Address to bind; 0.0.0.0 serves a classroom (needs a token).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(
        "--port", help="Port to listen on (0 picks a free one).", min=0, max=65535)] = 8765,
    token: Annotated[str | None, typer.Option("--token", help="Require this token on every request "
                                              "(generated when --host is not loopback and none is given).",
                                              show_default=False)] = None,
    no_browser: Annotated[bool, typer.Option("--no-browser", help="Do not open a browser tab.")] = False,
    pack: PackOption = None,
    classroom: Annotated[bool, typer.Option(
        "--classroom", help="Serve a class: learners join with a name and the class code (printed at start) and "
                            "get their own progress; --token is the teacher's, for /teacher.")] = False,
    class_code: Annotated[str | None, typer.Option(
        "--class-code", help="The class code learners join with (default: the class's code kept in the progress "
                             "database, or a new random one the first time).", show_default=False)] = None,
    joins_per_address: Annotated[int, typer.Option(
        "--joins-per-address", min=1, max=100_000,
        help="Joins (and recovery-code tries) one network address may make per 10 minutes in a classroom; "
             "raise it when the whole class reaches the server through one address (a NAT or proxy).")] = 10,
    database_url: Annotated[str | None, typer.Option(
        "--database-url", help="Keep progress in PostgreSQL (postgresql://user:password@host/db, through psycopg: "
                               "pip install 'alignlings[classroom]'), so several serve processes can share one "
                               "class. Default: the SQLite file under $ALIGNLINGS_HOME.", show_default=False)] = None,
    allow_import: Annotated[bool, typer.Option(
        "--allow-import", help="Allow progress import on a server with a token (off there by default: "
                               "everyone shares its progress store).")] = False,
    allow_unisolated: Annotated[bool, typer.Option(
        "--allow-unisolated", help="Serve a class or a shared server even where grading cannot isolate learner "
                                   "code (no Linux namespaces here); every page then says so. Without it, "
                                   "such a server refuses to start.")] = False,
    trusted_proxy: Annotated[list[str] | None, typer.Option(
        "--trusted-proxy", metavar="ADDR",
        help="A reverse proxy in front of this server (an IP address or network, repeatable): only requests "
             "from it may name the learner's address in X-Forwarded-For. Without it the headers are ignored "
             "and per-address limits count the connection's own address.", show_default=False)] = None,
    lang: LangOption = None,
) -> None:
    """Open the practice app in your browser: exercises, quiz, MLM drill, toy GRPO, progress.

    At start the server computes every exercise's reference values in the background
    ($ALIGNLINGS_WARM_REFERENCES=0 turns that off). With --database-url one server opens at most
    $ALIGNLINGS_DB_POOL_SIZE PostgreSQL connections (default 10).
    """
    import socket

    import uvicorn

    from alignlings.content.pack import PackError, default_pack_paths
    from alignlings.web.app import create_app

    lang = resolve_lang(lang)  # of these console lines; each page has its own
    if token is not None and not token.strip():
        raise UsageError("token_empty", "--token", lang=lang)
    if (classroom or host not in LOOPBACK) and token is None:
        token = secrets.token_urlsafe(18)
    if class_code is not None and not class_code.strip():
        raise UsageError("class_code_empty", "--class-code", lang=lang)
    if classroom and allow_import:
        raise UsageError("classroom_import", "--allow-import", lang=lang)
    proxies = trusted_proxies(trusted_proxy or [], lang)
    if database_url is not None:
        from alignlings.practice.store.postgres import is_database_url

        if not is_database_url(database_url):
            raise UsageError("database_url", "--database-url", lang=lang, got=database_url[:40])
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise UsageError("psycopg", "--database-url", lang=lang) from None
    unisolated = _check_isolation(shared=classroom or host not in LOOPBACK, allow_unisolated=allow_unisolated,
                                  lang=lang)
    try:
        # without a token, only loopback names are accepted in the Host header (no DNS rebinding)
        packs = [str(p) for p in given_packs(pack)] or default_pack_paths()  # --pack before or after `serve`
        web = create_app(packs, db_path=database_url, token=token, allowed_hosts=None if token else list(LOOPBACK_NAMES),
                         allow_import=True if allow_import else None, classroom=classroom, class_code=class_code,
                         max_joins_per_address=joins_per_address)
    except PackError as exc:
        raise UsageError("pack", "--pack", message=pack_error_text(exc)) from None

    if unisolated:
        web.state.templates.env.globals["unisolated"] = True  # base.html: a banner on every page

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        raise UsageError("listen", "--port", lang=lang, host=host, port=port, why=exc.strerror) from None
    port = sock.getsockname()[1]
    url = _url(host, port, None if classroom else token)
    say = MSG[lang]
    typer.echo(say["serving"].format(url=url))
    if classroom:
        base = url.rstrip("/")
        typer.echo(say["class_code"].format(code=web.state.class_code, base=base))
        typer.echo(say["teacher"].format(url=f"{base}/teacher?token={token}"))
    if host not in LOOPBACK:
        lan = _lan_address() if host in ("0.0.0.0", "::", "") else None
        if lan:
            typer.echo(say["lan_join" if classroom else "lan"].format(url=_url(lan, port, None if classroom else token)))
        typer.echo(say["anyone_class" if classroom else "anyone_url"])
    if token is not None and not allow_import and not classroom:
        typer.echo(say["import_off"])
    typer.echo(say["stop"])
    if not no_browser:
        import webbrowser

        opened = f"{url.rstrip('/')}/teacher?token={token}" if classroom else url
        threading.Timer(1.0, lambda: webbrowser.open(opened)).start()
    server = uvicorn.Server(server_config(web, proxies))
    server.run(sockets=[sock])
