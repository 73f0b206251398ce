"""The report of a run while it goes on, served on loopback (``streamscope run --serve``).

In: the run's metadata, topology and queries (for a run that grows as it goes, a way to get them
as they are now), then every batch of frames as the monitor closes them (``on_frames``) and, at
the end, how the run ended. Out: a page on ``127.0.0.1`` that shows
the report, rendered by ``report.html`` from everything closed so far (the same figures and
findings the final report will have, over fewer frames), replaced as frames close: the server
pushes each new batch as a server-sent event (Starlette, served by Uvicorn in a thread of its
own), and the page then loads the report again. Frames still waiting for a clock's calibration
are not shown until they are final.

Only the page's own address is served: a request whose ``Host`` is not the loopback address
and port it listens on is refused (a page elsewhere cannot reach it by DNS rebinding), and so is
one without the page's token (``?token=``, random per run, printed with the address); the page
passes the token on in its own requests. The server's threads are streamscope's own: where the
standard library is watched, they are none of the program's stages. Its connections are held
within bounds (``report.liveconn``): idle ones left open by others cannot lock the page out.
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
import resource
import secrets
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qs

from streamscope.aggregate.points import DropCount, FrameResult
from streamscope.core.topology import Topology
from streamscope.pipeline.program.auto.stages import own_thread
from streamscope.store.reader import Run
from streamscope.store.writer import InMemoryStore, QueryRecord, RunMeta

#: The report is rendered again at most this often (s) while frames keep closing.
RENDER_EVERY_S = 1.0
#: How often a connected page is told of new frames (s).
PUSH_EVERY_S = 0.25
#: The address the page listens on (loopback only).
HOST = "127.0.0.1"
#: The names a browser on this machine may give that address in a request's ``Host``.
_LOOPBACK_NAMES = (HOST, "localhost", "[::1]")

_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_ASGIApp = Callable[[_Scope, _Receive, _Send], Awaitable[None]]

_SHELL = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>streamscope live: {name}</title>
<style>
body {{ margin: 0; font: 14px system-ui, sans-serif; }}
#bar {{ padding: 6px 12px; background: #123; color: #fff; }}
#bar b {{ font-variant-numeric: tabular-nums; }}
iframe {{ border: 0; width: 100%; height: calc(100vh - 32px); }}
</style></head>
<body>
<div id="bar">streamscope live: {name} &mdash; <b id="frames">0</b> frames closed,
run <b id="state">running</b></div>
<iframe id="report" title="report" src="report?token={token}&amp;v=0"></iframe>
<script>
const token = "{token}";
let shown = 0;
function show(v) {{
  if (v <= shown) return;
  shown = v;
  document.getElementById("report").src = "report?token=" + token + "&v=" + v;
}}
const events = new EventSource("events?token=" + token);
events.addEventListener("frames", (e) => {{
  const d = JSON.parse(e.data);
  document.getElementById("frames").textContent = d.frames;
  show(d.version);
}});
events.addEventListener("end", (e) => {{
  const d = JSON.parse(e.data);
  document.getElementById("frames").textContent = d.frames;
  document.getElementById("state").textContent = d.status;
  show(d.version);
  events.close();
}});
</script>
</body></html>
"""


class LivePage:
    """A run's report, served while it runs; ``on_frames`` feeds it, ``finish`` ends it."""

    def __init__(
        self,
        meta: RunMeta,
        topology: Topology,
        queries: Sequence[QueryRecord],
        port: int = 0,
        grown: Callable[[], tuple[Topology, Sequence[QueryRecord]]] | None = None,
        keep_ns: int | None = None,
    ) -> None:
        self.name = meta.name
        #: A run that grows while it goes on (a program run as it is): what it has now.
        self._grown = grown
        self._known = {t for q in queries for t in q.targets}
        #: A long run's frames, rolled up as its file's are (``--keep``): what the page holds
        #: and renders stays bounded however long the run goes on.
        self._store = InMemoryStore(keep_ns)
        self._store.begin(meta, topology, queries)
        self._lock = threading.Lock()
        self.version = 0
        self.frames = 0
        self.status = "running"
        self._rendered: tuple[int, str] = (-1, "")
        self._rendered_at = 0.0
        self._port = port
        #: What a request must carry (``?token=``): random per page, URL-safe.
        self.token = secrets.token_urlsafe(32)
        #: The ``Host`` values served (lower case), known once it listens.
        self._hosts: frozenset[str] = frozenset()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._workers: ThreadPoolExecutor | None = None

    # --- fed by the run ---------------------------------------------------------------------

    def on_frames(self, results: Sequence[FrameResult], drops: Sequence[DropCount]) -> None:
        final = [r for r in results if not r.provisional]
        if not final and not drops:
            return
        if self._grown is not None and any(r.target not in self._known for r in final):
            topology, queries = self._grown()
            with self._lock:
                self._store.amend(topology, queries)
                self._known = {t for q in queries for t in q.targets}
        with self._lock:
            self._store.write_frames(final)
            self._store.write_drops(drops)
            self.frames += len({(r.frame) for r in final})
            self.version += 1

    def finish(self, status: str, error: str | None, duration_ns: int) -> None:
        with self._lock:
            self._store.finish(status, error, time.time_ns(), duration_ns)
            self.status = status
            self.version += 1

    # --- the page -----------------------------------------------------------------------------

    def report(self) -> str:
        """The report of everything closed so far (rendered again at most every
        ``RENDER_EVERY_S`` while the run goes on, at once when it ended)."""
        with self._lock:
            version, ended = self.version, self.status != "running"
            cached_version, page = self._rendered
            fresh = time.monotonic() - self._rendered_at < RENDER_EVERY_S
            if version == cached_version or (page and fresh and not ended):
                return page
            from streamscope.report import render_report  # plotly loads only when asked

            run = Run.from_memory(self._store)
            page, _ = render_report(run)
            self._rendered = (version, page)
            self._rendered_at = time.monotonic()
            return page

    def shell(self) -> str:
        # token_urlsafe's alphabet needs no escaping in HTML or a JS string
        return _SHELL.format(name=html.escape(self.name), token=self.token)

    def refusal(self, host: str | None, query: str) -> str | None:
        """Why a request for ``Host: host`` with the query string ``query`` is refused (None:
        it is served): a host other than the page's own address, or no valid token."""
        if host is None or host.lower() not in self._hosts:
            return f"this page is served as {HOST}:{self._port} only"
        given = parse_qs(query).get("token", [])
        if len(given) != 1 or not secrets.compare_digest(given[0], self.token):
            return "this page needs its token: open the address streamscope printed"
        return None

    def _guard(self, app: _ASGIApp) -> _ASGIApp:
        """``app`` behind ``refusal``: refused requests get 403 and never reach it, and their
        connection is closed (whoever lacks the token holds none of the page's connections
        busy, e.g. with requests sent ahead and never read)."""
        from starlette.responses import PlainTextResponse

        async def guarded(scope: _Scope, receive: _Receive, send: _Send) -> None:
            if scope["type"] == "http":
                headers = dict(scope.get("headers") or ())
                host = headers.get(b"host")
                why = self.refusal(
                    None if host is None else host.decode("latin-1"),
                    scope.get("query_string", b"").decode("latin-1"),
                )
                if why is not None:
                    refused = PlainTextResponse(
                        why + "\n", status_code=403, headers={"Connection": "close"}
                    )
                    await refused(scope, receive, send)
                    return
            await app(scope, receive, send)

        return guarded

    async def events(self) -> AsyncIterator[str]:
        """Server-sent events: ``frames`` whenever frames closed, ``end`` when the run ended."""
        seen = -1
        while True:
            with self._lock:
                version, frames, status = self.version, self.frames, self.status
            if version != seen:
                seen = version
                data = json.dumps({"version": version, "frames": frames, "status": status})
                kind = "end" if status != "running" else "frames"
                yield f"event: {kind}\ndata: {data}\n\n"
                if kind == "end":
                    return
            await asyncio.sleep(PUSH_EVERY_S)

    # --- serving ------------------------------------------------------------------------------

    def start(self) -> str:
        """Serve on loopback in a thread of its own; the page's address, with its token."""
        import uvicorn
        from starlette.applications import Starlette
        from starlette.responses import HTMLResponse, StreamingResponse
        from starlette.routing import Route

        from streamscope.report import liveconn

        workers = self._workers = ThreadPoolExecutor(
            2, thread_name_prefix="streamscope-live-page", initializer=own_thread
        )

        async def shell(_request: Any) -> HTMLResponse:
            return HTMLResponse(self.shell(), headers={"Cache-Control": "no-store"})

        async def report(_request: Any) -> HTMLResponse:
            page = await asyncio.get_running_loop().run_in_executor(workers, self.report)
            return HTMLResponse(page, headers={"Cache-Control": "no-store"})

        async def events(_request: Any) -> StreamingResponse:
            return StreamingResponse(
                self.events(),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-store"},
            )

        app = Starlette(
            routes=[Route("/", shell), Route("/report", report), Route("/events", events)]
        )
        try:  # here, so that a port in use is said by the caller, with its reason
            sock = socket.create_server((HOST, self._port), backlog=liveconn.BACKLOG)
        except OSError as exc:
            raise OSError(f"the live page could not listen on {HOST}:{self._port}: {exc}") from None
        config = uvicorn.Config(
            self._guard(app), host=HOST, port=self._port, log_level="warning",
            access_log=False, lifespan="off", ws="none",
            timeout_keep_alive=int(liveconn.IDLE_TIMEOUT_S),
        )  # fmt: skip
        cap = liveconn.connection_cap(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        say = logging.getLogger("uvicorn.error").warning  # to stderr, as the server's own lines
        server = self._server = liveconn.LimitedServer(
            config, sock, liveconn.ConnectionLimiter(cap), say
        )

        def serve() -> None:
            own_thread()  # its event loop, tasks and queues are none of the program's
            server.run()

        self._thread = threading.Thread(target=serve, name="streamscope-live-page", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10.0
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                sock.close()
                raise OSError(f"the live page could not listen on {HOST}:{self._port}")
            time.sleep(0.02)
        self._port = port = int(sock.getsockname()[1])
        self._hosts = frozenset(
            f"{name}{suffix}"
            for name in _LOOPBACK_NAMES
            for suffix in ((f":{port}", "") if port == 80 else (f":{port}",))
        )  # a browser leaves out port 80
        return f"http://{HOST}:{port}/?token={self.token}"

    def stop(self, linger_s: float = 0.0) -> None:
        """Stop serving (after ``linger_s``, so that open pages get the end and the last
        report)."""
        if self._server is None:
            return
        if linger_s > 0:
            time.sleep(linger_s)
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(5.0)
        if self._workers is not None:
            self._workers.shutdown(wait=False)


__all__ = ["LivePage"]
