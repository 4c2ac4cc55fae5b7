"""`tribunal console`: the control plane on one live web page per thing (aiohttp, server-rendered).

Reads what already serves: the worker's state pages for one key (`worker_page`), the feed of the output topics
(`feed.Feed`) for lists, recent records and live updates, the log for an explanation (`explain`, as the CLI),
`/proc` for a job set's task processes. Each page opens `/events?kind=K&key=KEY` (server-sent events): the feed
pushes an `update` whenever a record concerns it, and the page fetches its fragments again.

Who may do what is the dispatcher API's (`streams.dispatcher.auth`): with `--auth-file` every page needs an
identity (a bearer token, a client certificate, or a session made by signing in with a token, kept in a
`SameSite=Strict`, `HttpOnly` cookie; its forms carry a per-session CSRF token); any identity may look, and the
actions pass `auth.may` as the API's requests do (a cap: `admin` of the namespace; a cancel: its admin, or the
tenant of the job's worker; a redrive: an admin of every namespace, `*`). Without an auth file the console
serves loopback only, to whoever runs it, with every action (as the API does).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from aiohttp import web

from schemas import dispatch as records
from streams.clients import worker_page
from streams.console import pages
from streams.console.feed import Feed, Update
from streams.dispatcher.api import owned_or_not_found
from streams.dispatcher.auth import Identity, Keyring, Verb, may
from streams.dispatcher.guard import Unauthenticated, identify
from streams.errors import NotFound, TribunalError
from streams.settings import Settings

log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
SESSION = "tribunal_console"
SHOWN_DECISIONS = 50
PLOTTED_APPS = 12  # a pool's plot draws the apps with the most instances, at most this many


class Console:
    def __init__(self, settings: Settings, worker_web: str, keyring: Keyring | None,
                 state_dirs: tuple[Path, ...] = ()) -> None:
        self.settings, self.worker_web, self.keyring, self.state_dirs = settings, worker_web, keyring, state_dirs
        self.feed = Feed(settings)
        self.sessions: dict[str, tuple[str, str]] = {}  # session id -> (identity name, CSRF token)
        self.client: Any = None  # the DispatcherClient the actions write through
        self.worker: dict[str, Any] | None = None  # the worker's partitions and lag, as last read (`watch_worker`)
        self.plots: dict[str, tuple[Any, str | None]] = {}  # pool -> (its last decision's seq, its plot)

    # -- who is asking --------------------------------------------------------------------------
    def identity(self, request: web.Request) -> Identity | None:
        """The request's identity (None: the console runs without an auth file); 401 if it needs one and has none."""
        if self.keyring is None:
            return None
        session = self.sessions.get(request.cookies.get(SESSION, ""))
        if request.headers.get("Authorization") is None and session is not None:
            found = self.keyring.by_name(session[0])
            if found is not None:
                return found
        try:
            return identify(self.keyring, request.headers.get("Authorization"),
                            request.transport.get_extra_info("peercert") if request.transport else None)
        except Unauthenticated as e:
            raise web.HTTPUnauthorized(text=str(e), headers={"WWW-Authenticate": 'Bearer realm="tribunal"'}) from None

    def allow(self, request: web.Request, verb: Verb, namespace: str, worker: str | None = None) -> str | None:
        """403 unless the identity may; its name (the command's principal)."""
        identity: Identity | None = request.get("identity")
        if identity is None:
            return None
        why = may(identity, verb, namespace, worker)
        if why is not None:
            raise web.HTTPForbidden(text=why)
        if request.get("session_csrf") is not None:  # a browser's session: the form must carry its token
            raise web.HTTPForbidden(text="the form's CSRF token is missing or wrong")
        return identity.name

    def context(self, request: web.Request, title: str, stream: str = "", **more: Any) -> dict[str, Any]:
        identity: Identity | None = request.get("identity")
        return {"title": title, "stream": stream, "since": self.feed.told, "who": identity,
                "local": self.keyring is None, "csrf": request.get("csrf", ""), **more}

    def may_act(self, request: web.Request, verb: Verb, namespace: str) -> bool:
        identity: Identity | None = request.get("identity")
        return identity is None or may(identity, verb, namespace) is None

    # -- pages ------------------------------------------------------------------------------------
    def page(self, request: web.Request, layout: str, fragments: dict[str, str], context: dict[str, Any]
             ) -> web.Response:
        """The whole page, or the one fragment the live script asked for."""
        fragment = request.query.get("fragment")
        if fragment is not None:
            template = fragments.get(fragment)
            if template is None:
                raise web.HTTPNotFound(text=f"no fragment {fragment!r}")
            return web.Response(text=pages.render(template, **context), content_type="text/html")
        return web.Response(text=pages.render(layout, **context), content_type="text/html")

    async def overview(self, request: web.Request) -> web.Response:
        v = self.feed.view
        now = int(time.time() * 1000)
        pools = []
        for pool in sorted(set(v.instances) | set(v.decisions)):
            apps = v.instances.get(pool, {})
            last = v.decisions[pool][-1] if v.decisions.get(pool) else None
            running = v.actuations.get(pool, {}).get("running")
            pools.append({"pool": pool, "apps": len(apps), "decided": sum(apps.values()),
                          "observed": sum(running.values()) if running else None,
                          "free": last.get("free") if last else None,
                          "last": f"#{last['seq']} {last.get('outcome', '')}" if last else None})
        namespaces = [{**h, "namespace": ns, "failed": v.failed_last_hour(ns, now)}
                      for ns, h in sorted(v.health.items())]
        groups = [{**h, "group": g, "orphans": len(h.get("orphans", ())),
                   "alarms": sum(1 for limit in v.limits.get(g, {}).values() if limit.get("alarm"))}
                  for g, h in sorted(v.groups.items())]
        job_sets = [{"job_set": js, "nodes": len(p.get("nodes", {})), "epoch": p.get("epoch"), "tasks": p.get("tasks"),
                     "released": p.get("released"), "awaiting": ", ".join(p.get("awaiting", ()))}
                    for js, p in sorted(v.plans.items())]
        context = self.context(request, "Overview", "kind=any", pools=pools, namespaces=namespaces, groups=groups,
                               job_sets=job_sets, letters=sorted(v.letters.items()), worker_web=self.worker_web,
                               workers=self.worker)
        return self.page(request, "overview", {"summary": "overview_summary"}, context)

    async def watch_worker(self, every: float = 5.0) -> None:
        """Read the worker's health every `every` seconds (a worker's /metrics page takes a while under load: a
        page must not wait for it), until cancelled."""
        while True:
            self.worker = await self.worker_health()
            await asyncio.sleep(every)

    async def worker_health(self) -> dict[str, Any] | None:
        """The worker's input partitions and their lag, from its /metrics page; None if it does not answer."""
        import urllib.request

        def read() -> str:
            with urllib.request.urlopen(f"http://{self.worker_web}/metrics", timeout=5) as page:
                return str(page.read().decode())

        try:
            text = await asyncio.to_thread(read)
        except OSError:
            return None
        from prometheus_client.parser import text_string_to_metric_families

        lag, partitions = 0.0, 0
        for family in text_string_to_metric_families(text):
            if family.name == "tribunal_consumer_lag":
                for sample in family.samples:
                    lag += sample.value
                    partitions += 1
        return {"lag": int(lag), "partitions": partitions}

    async def state(self, fold: str, key: str) -> tuple[dict[str, Any] | None, str | None]:
        try:
            return await asyncio.to_thread(worker_page, self.worker_web, fold, key), None
        except NotFound:
            return None, None
        except TribunalError as e:
            return None, str(e)

    async def pool(self, request: web.Request) -> web.Response:
        pool = request.match_info["pool"]
        found, error = await self.state("pools", pool)
        decider = (found or {}).get("decider")
        running = self.feed.view.actuations.get(pool, {}).get("running")
        apps = [{**a, "running": (running or {}).get(a["app"])} for a in (decider or {}).get("apps", [])]
        rows, page, count = pages.page_of(apps, int(request.query.get("page", "1") or 1))
        recent = list(self.feed.view.decisions.get(pool, ()))
        context = self.context(request, f"Pool {pool}", f"kind=pool&key={quote(pool)}", pool=pool, state=decider,
                               apps=rows, page=page, pages=count, error=error, decisions=_decision_rows(recent),
                               observed=sum(running.values()) if running else None,
                               plot=self.plot(pool, recent) if request.query.get("fragment") in (None, "state")
                               else None)
        return self.page(request, "pool", {"state": "pool_state", "decisions": "pool_decisions"}, context)

    def plot(self, pool: str, recent: list[dict[str, Any]]) -> str | None:
        """The pool's plot, drawn again only when a decision came since (a plot costs a hundred times a table)."""
        last = recent[-1].get("seq") if recent else None
        kept = self.plots.get(pool)
        if kept is None or kept[0] != last:
            kept = (last, _instances_plot(recent, int(time.time() * 1000)))
            self.plots[pool] = kept
        return kept[1]

    async def decision(self, request: web.Request) -> web.Response:
        pool, seq = request.match_info["pool"], int(request.match_info["seq"])

        def explained() -> str:
            from streams.audit.explain import cause_of_seq, explain, render
            from streams.audit.kafka_log import KafkaLog

            log_ = KafkaLog.read(self.settings)
            return render(explain(log_, self.settings, cause_of_seq(log_, self.settings, "scaling-decisions", pool,
                                                                      seq, "seq")))

        text = await asyncio.to_thread(explained)
        context = self.context(request, f"Pool {pool}: decision {seq}", back=f"/pools/{quote(pool)}", text=text)
        return web.Response(text=pages.render("explain", **context), content_type="text/html")

    async def namespace(self, request: web.Request) -> web.Response:
        namespace = request.match_info["namespace"]
        found, error = await self.state("dispatch", namespace)
        identity: Identity | None = request.get("identity")
        jobs = list((found or {}).get("jobs", []))
        if identity is not None and identity.role == "tenant":  # as the API shows a tenant: its own worker only
            jobs = [j for j in jobs if j.get("worker") == identity.worker]
        now = (found or {}).get("now", 0)
        for job in jobs:
            job["status"] = "running" if job["running"] else "pending" if job["expected_start"] > now else "startable"
        rows, page, count = pages.page_of(jobs, int(request.query.get("page", "1") or 1))
        events = list(reversed(self.feed.view.jobs.get(namespace, ())))[:SHOWN_DECISIONS]
        context = self.context(request, f"Namespace {namespace}", f"kind=namespace&key={quote(namespace)}",
                               namespace=namespace, health=self.feed.view.health.get(namespace),
                               failed=self.feed.view.failed_last_hour(namespace, int(time.time() * 1000)),
                               jobs=rows, page=page, pages=count, shown=len(jobs),
                               held=(found or {}).get("pending", 0) + (found or {}).get("running", 0), error=error,
                               events=events, admin=self.may_act(request, "cap", namespace),
                               can_cancel=self.may_act(request, "report", namespace))  # a tenant: its own jobs
        return self.page(request, "namespace", {"counts": "namespace_counts", "jobs": "namespace_jobs",
                                                "events": "namespace_events"}, context)

    async def job(self, request: web.Request) -> web.Response:
        namespace, uuid = request.match_info["namespace"], request.match_info["uuid"]

        def history() -> str:
            from streams.audit.jobs import job_history, render_history
            from streams.audit.kafka_log import KafkaLog

            return render_history(job_history(KafkaLog.read(self.settings), self.settings, uuid, namespace))

        text = await asyncio.to_thread(history)
        context = self.context(request, f"Job {uuid}", back=f"/namespaces/{quote(namespace)}", text=text)
        return web.Response(text=pages.render("explain", **context), content_type="text/html")

    async def job_set(self, request: web.Request) -> web.Response:
        job_set = request.match_info["job_set"]
        plan = self.feed.view.plans.get(job_set)
        ranges = {node: ", ".join(f"{a}-{b}" for a, b in spans)
                  for node, spans in (plan or {}).get("ranges", {}).items()}
        context = self.context(request, f"Job set {job_set}", f"kind=job_set&key={quote(job_set)}", plan=plan,
                               ranges=ranges, runs=self.task_runs(job_set))
        return self.page(request, "job_set", {"plan": "job_set_plan"}, context)

    def task_runs(self, job_set: str) -> dict[str, str]:
        """node -> the tasks its processes run now (`shards processes`, from the state directories given)."""
        from streams.processes.guardian import found

        runs: dict[str, set[str]] = {}
        for directory in self.state_dirs:  # a node's runs are marked <state dir>/<job set>/<node>
            for process in found(str(directory.resolve() / job_set)):
                node, task = [*process.run.split("/"), "", ""][:2]
                if process.guarded and node:
                    runs.setdefault(node, set()).add(task)
        return {node: ", ".join(sorted(tasks, key=lambda t: (len(t), t))) for node, tasks in runs.items()}

    async def group(self, request: web.Request) -> web.Response:
        group = request.match_info["group"]
        context = self.context(request, f"Group {group}", f"kind=group&key={quote(group)}",
                               health=self.feed.view.groups.get(group), limits=self.feed.view.limits.get(group, {}))
        return self.page(request, "group", {"limits": "group_limits"}, context)

    async def letters(self, request: web.Request) -> web.Response:
        context = self.context(request, "Dead letters", "kind=dlq", letters=sorted(self.feed.view.letters.items()))
        return self.page(request, "letters", {"letters": "letters_list"}, context)

    async def letter_list(self, request: web.Request) -> web.Response:
        topic, reason = request.match_info["topic"], request.match_info["reason"]
        rows = [{**r, "reason": r.get("reason", "")} for r in
                reversed(self.feed.view.recent_letters.get((topic, reason), ()))]
        context = self.context(request, f"Dead letters: {reason} on {topic}", f"kind=dlq&key={quote(topic)}",
                               topic=topic, reason=reason, rows=rows, admin=self.may_act(request, "cap", "*"))
        return self.page(request, "letter_list", {"recent": "letter_rows"}, context)

    # -- actions ----------------------------------------------------------------------------------
    async def _form(self, request: web.Request) -> Any:
        form = await request.post()
        session = request.get("session_csrf")
        if session is not None and secrets.compare_digest(str(form.get("csrf", "")), session):
            request["session_csrf"] = None  # the form came from this session's page
        return form

    async def _written(self, request: web.Request, command: records.Command, message: str) -> web.Response:
        await self.client.send(command)
        back = request.headers.get("Referer") or "/"
        context = self.context(request, "Done", message=message, back=back)
        return web.Response(text=pages.render("done", **context), content_type="text/html")

    async def max_threads(self, request: web.Request) -> web.Response:
        namespace = request.match_info["namespace"]
        form = await self._form(request)
        principal = self.allow(request, "cap", namespace)
        cap = _cap(form.get("max"))
        return await self._written(request, records.MaxThreadsSet(namespace=namespace, max=cap, principal=principal),
                                   f"namespace {namespace}: at most {cap} running")

    async def worker_max(self, request: web.Request) -> web.Response:
        namespace = request.match_info["namespace"]
        form = await self._form(request)
        principal = self.allow(request, "cap", namespace)
        worker, cap = str(form.get("worker", "")), _cap(form.get("max"))
        if not 0 < len(worker) <= 200:
            raise web.HTTPUnprocessableEntity(text="a worker's name is 1 to 200 characters")
        return await self._written(request, records.WorkerMaxSet(namespace=namespace, worker=worker, max=cap,
                                                                 principal=principal),
                                   f"worker {worker} in {namespace}: at most {cap} running")

    async def cancel(self, request: web.Request) -> web.Response:
        namespace, uuid = request.match_info["namespace"], request.match_info["uuid"]
        await self._form(request)
        principal = self.allow(request, "report", namespace)
        await owned_or_not_found(self.worker_web, request.get("identity"), namespace, uuid)  # as the API
        return await self._written(request, records.JobCancelled(namespace=namespace, uuid=uuid, principal=principal),
                                   f"cancel of job {uuid} written")

    async def redrive(self, request: web.Request) -> web.Response:
        from streams import dlq

        topic, reason = request.match_info["topic"], request.match_info["reason"]
        await self._form(request)
        self.allow(request, "cap", "*")  # every namespace's admin: a redrive may write any fold's inputs
        summary = await dlq.redrive(self.settings, topic, reason, None, None)
        context = self.context(request, "Done", back=f"/dead-letters/{quote(topic)}/{quote(reason)}",
                               message=f"redriven: {sum(summary.redriven.values())}; redriven before: "
                                       f"{sum(summary.already.values())}")
        return web.Response(text=pages.render("done", **context), content_type="text/html")

    # -- signing in -------------------------------------------------------------------------------
    async def login_form(self, request: web.Request) -> web.Response:
        return web.Response(text=pages.render("login", **self.context(request, "Sign in")), content_type="text/html")

    async def login(self, request: web.Request) -> web.Response:
        form = await request.post()
        identity = self.keyring.by_token(str(form.get("token", ""))) if self.keyring is not None else None
        if identity is None:
            context = self.context(request, "Sign in", error="unknown or revoked token")
            return web.Response(text=pages.render("login", **context), content_type="text/html", status=401)
        session = secrets.token_urlsafe(32)
        self.sessions[session] = (identity.name, secrets.token_urlsafe(24))
        response = web.Response(status=303, headers={"Location": "/"})
        response.set_cookie(SESSION, session, httponly=True, samesite="Strict", secure=request.secure, path="/")
        return response

    async def logout(self, request: web.Request) -> web.Response:
        self.sessions.pop(request.cookies.get(SESSION, ""), None)
        response = web.Response(status=303, headers={"Location": "/login"})
        response.del_cookie(SESSION, path="/")
        return response

    # -- live -------------------------------------------------------------------------------------
    async def events(self, request: web.Request) -> web.StreamResponse:
        """`update` whenever the feed reads a record of this page's kind and key (`kind=any`: every record)."""
        kind, key = request.query.get("kind", "any"), request.query.get("key")
        queue: asyncio.Queue[Update] = asyncio.Queue(maxsize=1_000)

        def heard(update: Update) -> None:
            if (kind == "any" or update.kind == kind) and (key is None or update.key == key):
                with contextlib.suppress(asyncio.QueueFull):  # a page that cannot keep up: it refetches anyway
                    queue.put_nowait(update)

        unsubscribe = self.feed.subscribe(heard)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"})
        await response.prepare(request)
        try:
            await response.write(b"event: ready\ndata: {}\n\n")
            with contextlib.suppress(ValueError):
                if self.feed.changed_since(kind, key, int(request.query.get("since", ""))):
                    await response.write(f"event: update\ndata: {kind} {key}\n\n".encode())  # what the page missed
            while True:
                try:
                    update = await asyncio.wait_for(queue.get(), 15)
                except TimeoutError:
                    await response.write(b": keep-alive\n\n")
                    continue
                while not queue.empty():  # a burst: one update for all of it
                    update = queue.get_nowait()
                await response.write(f"event: update\ndata: {update.kind} {update.key}\n\n".encode())
        except ConnectionResetError:
            pass
        finally:
            unsubscribe()
        return response

    async def static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name == "console.css":
            return web.Response(text=pages.STYLE, content_type="text/css")
        if name == "console.js":
            return web.Response(text=pages.SCRIPT, content_type="application/javascript")
        raise web.HTTPNotFound(text=name)

    # -- the server -------------------------------------------------------------------------------
    def app(self) -> web.Application:
        console = self

        @web.middleware
        async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
            public = request.path in ("/login", "/logout") or request.path.startswith("/static/")
            if console.keyring is not None and not public:
                try:
                    request["identity"] = console.identity(request)
                except web.HTTPUnauthorized:
                    if request.method == "GET" and "Authorization" not in request.headers:
                        raise web.HTTPSeeOther("/login") from None
                    raise
                session = console.sessions.get(request.cookies.get(SESSION, ""))
                if session is not None and request.headers.get("Authorization") is None:
                    request["csrf"] = session[1]
                    if request.method == "POST":
                        request["session_csrf"] = session[1]  # cleared by a form that carries it
            return await handler(request)

        @web.middleware
        async def plain_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
            try:
                return await handler(request)
            except web.HTTPException as e:
                if e.status < 400:
                    raise
                context = self.context(request, e.reason, message=f"{e.status}: {e.text or e.reason}", back="/")
                response = web.Response(text=pages.render("done", **context), content_type="text/html",
                                        status=e.status)
                for header in ("WWW-Authenticate",):
                    if header in e.headers:
                        response.headers[header] = e.headers[header]
                return response
            except (NotFound, TribunalError) as e:
                status = 404 if isinstance(e, NotFound) else 503
                context = self.context(request, "Not found" if status == 404 else "Unavailable", message=str(e),
                                       back="/")
                return web.Response(text=pages.render("done", **context), content_type="text/html", status=status)

        app = web.Application(middlewares=[plain_errors, guard], client_max_size=1 << 16)
        app.router.add_get("/", self.overview)
        app.router.add_get("/static/{name}", self.static)
        app.router.add_get("/events", self.events)
        app.router.add_get("/login", self.login_form)
        app.router.add_post("/login", self.login)
        app.router.add_get("/logout", self.logout)
        app.router.add_get("/pools/{pool}", self.pool)
        app.router.add_get("/pools/{pool}/decisions/{seq:\\d+}", self.decision)
        app.router.add_get("/namespaces/{namespace}", self.namespace)
        app.router.add_post("/namespaces/{namespace}/max-threads", self.max_threads)
        app.router.add_post("/namespaces/{namespace}/worker-max", self.worker_max)
        app.router.add_get("/namespaces/{namespace}/jobs/{uuid}", self.job)
        app.router.add_post("/namespaces/{namespace}/jobs/{uuid}/cancel", self.cancel)
        app.router.add_get("/job-sets/{job_set}", self.job_set)
        app.router.add_get("/groups/{group}", self.group)
        app.router.add_get("/dead-letters", self.letters)
        app.router.add_get("/dead-letters/{topic}/{reason}", self.letter_list)
        app.router.add_post("/dead-letters/{topic}/{reason}/redrive", self.redrive)
        return app


def _cap(value: Any) -> int:
    try:
        cap = int(str(value))
    except ValueError:
        raise web.HTTPUnprocessableEntity(text=f"a cap is a whole number, not {value!r}") from None
    if cap < 0:
        raise web.HTTPUnprocessableEntity(text="a cap is 0 or more")
    return cap


def _decision_rows(recent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for d in reversed(recent[-SHOWN_DECISIONS:]):
        trigger = d.get("trigger") or {}
        moves = ", ".join(f"{m['count']} {m['from']}->{m['to']}" for m in d.get("moves", ()))
        rows.append({"seq": d.get("seq"), "outcome": d.get("outcome"), "granted": d.get("granted", "-"),
                     "requested": d.get("requested", "-"), "moves": moves or "-",
                     "trigger": f"{trigger['app']} {trigger.get('metrical')}" if trigger.get("app") else
                     d.get("driver", "-"),
                     "reason": d.get("reason", "")})
    return rows


def _instances_plot(recent: list[dict[str, Any]], now_ms: int) -> str | None:
    """Instances per app after each recent decision, up to now (a decision of changes updates the apps it names),
    over time, and each trigger's metrical on a second axis: the busiest `PLOTTED_APPS` apps."""
    decisions = [d for d in recent if d.get("type") == "ScalingDecision"]
    if not decisions:
        return None
    from matplotlib.ticker import MaxNLocator

    from streams.audit.plots import instances_plot, label_x, pyplot, svg, when

    current: dict[str, int] = {}
    series: list[dict[str, int]] = []
    for d in decisions:
        current = {**(current if d.get("form") == "changes" else {}), **d.get("instances", {})}
        series.append(current)
    apps = sorted(series[-1], key=lambda a: (-series[-1][a], a))[:PLOTTED_APPS]
    times = [when(d["cause"]["timestamp"]) for d in decisions]
    end = max(now_ms, decisions[-1]["cause"]["timestamp"])
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 3))
    instances_plot(ax, [*times, when(end)], {app: [*(s.get(app, 0) for s in series), series[-1].get(app, 0)]
                                             for app in apps})
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    metrical = ax.twinx()
    metrical.plot(times, [(d.get("trigger") or {}).get("metrical") for d in decisions], "o", color="#555",
                  markersize=3, label="trigger's metrical")
    metrical.set_ylim(0, 100)
    metrical.set_ylabel("trigger's metrical")
    ax.legend(loc="upper left", ncol=min(6, len(apps)), fontsize=8)
    label_x([ax], "time")
    return str(svg(fig))


async def serve(settings: Settings, host: str, port: int, worker_web: str, keyring: Keyring | None,
                tls: Any = None, state_dirs: tuple[Path, ...] = ()) -> None:
    """Serve until cancelled."""
    from streams.dispatcher.client import DispatcherClient

    console = Console(settings, worker_web, keyring, state_dirs)
    feeding = [asyncio.create_task(console.feed.run()), asyncio.create_task(console.watch_worker())]
    async with DispatcherClient(settings, namespace="") as client:
        console.client = client
        runner = web.AppRunner(console.app(), shutdown_timeout=2)
        await runner.setup()
        await web.TCPSite(runner, host, port, ssl_context=tls).start()
        log.info("console on %s://%s:%d (%s)", "https" if tls else "http", host, port,
                 f"identities from {keyring.path}" if keyring else "no authentication: loopback only")
        try:
            await asyncio.Event().wait()
        finally:
            for task in feeding:
                task.cancel()
            await runner.cleanup()
