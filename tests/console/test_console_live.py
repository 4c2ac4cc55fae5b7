"""The console in a real browser (Debian's Chromium through its WebDriver), on a live stack: a worker, the ticker,
an executor, the dispatcher's API, two shard nodes running task processes, and the console itself with identities.

What a user would check: every page loads with no error in the browser's console and no serious or critical
accessibility violation (axe-core); a metric makes a decision appear on the pool's page without a reload; a job
assigned through the API appears, runs and ends on the namespace's page; a killed shard node's tasks move to the
other on the job set's page; a reader's pages offer no admin action, and an admin request forged with a reader's
session (or token) is refused and writes nothing. With TRIBUNAL_SCREENSHOTS=1 the pages' screenshots are written
into the documentation (docs/images/console/), as the console page shows them.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from streams.dispatcher.auth import AuthFile
from streams.infra.topology import free_ports
from tests.conftest import env_of
from tests.helpers import Service, Worker, tribunal, until, wait_until_ready

ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / "infra" / "npm" / "node_modules" / "axe-core" / "axe.min.js"
SHOTS = ROOT / "docs" / "images" / "console"
UPDATE_BOUND_S = 15  # a record's effect is on the open page within this (bench/console.py measures the path)
pytestmark = [pytest.mark.integration]


@dataclass
class Site:
    env: dict[str, str]
    base: str
    api: str
    tokens: dict[str, str]
    tmp: Path
    services: dict[str, Service] = field(default_factory=dict)


def _produce(bootstrap: str, topic: str, records: list[tuple[str, dict[str, Any]]]) -> None:
    from streams import kafka

    async def send() -> None:
        producer = kafka.producer(bootstrap)
        await producer.start()
        try:
            for key, value in records:
                await producer.send_and_wait(topic, json.dumps(value).encode(), key=key.encode())
        finally:
            await producer.stop()

    asyncio.run(send())


@pytest.fixture(scope="module")
def site(kafka: str, zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    tmp = tmp_path_factory.mktemp("console")
    name = f"t{uuid.uuid4().hex[:10]}"
    env = {**env_of(kafka, name, tmp), "TRIBUNAL_PARTITIONS": "2"}
    tribunal("topics", "create", env=env)
    auth = tmp / "auth.json"
    tokens = {"ops": AuthFile(auth).create("ops", "admin", ("*",), None),
              "viewer": AuthFile(auth).create("viewer", "reader", ("*",), None)}
    console_port, api_port = free_ports(2)
    shards = tmp / "shards"
    s = Site(env, f"http://127.0.0.1:{console_port}", f"http://127.0.0.1:{api_port}", tokens, tmp)
    nodes = ("shards", "node", "--job-set", "js", "--command", "sleep 120", "--state-dir", str(shards), "--zookeeper",
             zookeeper, "--shard-root", f"/{name}-shards", "--session-timeout", "4", "--period", "1")
    specs = {
        "worker": ("worker",),
        "ticker": ("dispatch", "ticker", "--namespace", "demo", "--root", f"/{name}"),
        "executor": ("dispatch", "executor", "--namespace", "demo", "--worker", "w1", "--seconds", "3"),
        "api": ("dispatch", "api", "--port", str(api_port), "--auth-file", str(auth)),
        "console": ("console", "--port", str(console_port), "--auth-file", str(auth), "--state-dir", str(shards)),
        "n1": (*nodes, "--id", "n1", "--address", "10.0.0.1:9000"),
        "n2": (*nodes, "--id", "n2", "--address", "10.0.0.2:9000"),
    }
    for service_name, args in specs.items():
        service = Worker(env, tmp / "worker.log") if service_name == "worker" else \
            Service(env, tmp / f"{service_name}.log", *args)
        service.start()
        s.services[service_name] = service
    try:
        wait_until_ready(s.services["worker"], 1)  # type: ignore[arg-type]
        tribunal("pools", "policy", "apply", str(ROOT / "examples" / "decider-pool-a.yaml"), "--pool", "pool-a",
                 env=env)
        tribunal("shards", "tasks", "--job-set", "js", "6", env=env)
        tribunal("dispatch", "jobs", "max", "--namespace", "demo", "--threads", "2", env=env)
        tribunal("pools", "metric", "ats", "101", "--pool", "pool-a", env=env)  # out of range: a dead letter
        _produce(kafka, f"{name}.scheduler-events", [
            ("g1", {"type": "SchedulerRegistered", "group": "g1", "scheduler": s_id, "fault_tolerance": 1,
                    "alarm_threshold": 3}) for s_id in ("A", "B")])
        _produce(kafka, f"{name}.job-events", [("g1", {"type": "JobCreated", "group": "g1", "job": f"job-{i}"})
                                               for i in range(5)])
        until(lambda: _answers(s.base), lambda: f"the console to answer: {s.services['console'].log()}", 60)
        yield s
    finally:
        for service in s.services.values():
            service.stop()


def _answers(base: str) -> bool:
    try:
        with urllib.request.urlopen(base + "/login", timeout=5) as page:
            return page.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as DriverService

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1280,1400", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-sync"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=DriverService("/usr/bin/chromedriver"))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def sign_in(driver: Any, site: Site, who: str) -> None:
    from selenium.webdriver.common.by import By

    driver.delete_all_cookies()
    driver.get(site.base + "/login")
    driver.find_element(By.NAME, "token").send_keys(site.tokens[who])
    driver.find_element(By.CSS_SELECTOR, "form button").click()
    until(lambda: driver.current_url.rstrip("/") == site.base, f"{who} to be signed in", 20)


def check(driver: Any, name: str) -> None:
    """No error in the browser's console, no serious or critical axe-core violation; the screenshot."""
    until(lambda: driver.execute_script("return document.body.dataset.live || 'none'") in ("yes", "none"),
          f"{name}'s live stream to open", 20)
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], (name, errors)
    driver.execute_script(AXE.read_text())
    violations = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document).then(r => done(r.violations.map(v => ({id: v.id, impact: v.impact, "
        "nodes: v.nodes.length, help: v.help}))));")
    assert [v for v in violations if v["impact"] in ("serious", "critical")] == [], (name, violations)
    shot = Path(os.environ.get("TRIBUNAL_SCREENSHOTS_DIR", "/tmp")) / f"console-{name}.png"
    driver.save_screenshot(str(shot))
    if os.environ.get("TRIBUNAL_SCREENSHOTS") == "1":
        SHOTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(SHOTS / f"{name}.png"))


def follow(driver: Any, selector: str) -> None:
    """Open the link `selector` finds (its href read again if a live update replaced it meanwhile)."""
    from selenium.common.exceptions import StaleElementReferenceException

    def href() -> str | None:
        try:
            return str(driver.find_element("css selector", selector).get_attribute("href"))
        except StaleElementReferenceException:
            return None

    driver.get(until(href, f"a link {selector}", 20))


def text_of(driver: Any) -> str:
    return str(driver.execute_script("return document.body.innerText"))


def test_every_page_loads_live_clean_and_accessible_and_records_appear_without_a_reload(site: Site,
                                                                                        browser: Any) -> None:
    browser.delete_all_cookies()
    browser.get(site.base + "/")  # no identity: the sign-in form
    until(lambda: browser.current_url.endswith("/login"), "the sign-in form", 20)
    check(browser, "login")
    sign_in(browser, site, "ops")
    until(lambda: "pool-a" in (browser.refresh() or text_of(browser)) and "g1" in text_of(browser)
          and "js" in text_of(browser), lambda: f"the overview to list them: {text_of(browser)}", 60)
    check(browser, "overview")

    # a metric: its decision appears on the open pool page, pushed
    browser.get(site.base + "/pools/pool-a")
    check(browser, "pool")
    rows = len(browser.find_elements("css selector", "tr[data-seq]"))
    sent = time.monotonic()
    tribunal("pools", "metric", "ats", "75", "--pool", "pool-a", env=site.env)
    until(lambda: len(browser.find_elements("css selector", "tr[data-seq]")) > rows,
          lambda: f"the decision to appear: {text_of(browser)}", UPDATE_BOUND_S)
    print(f"decision on the page {time.monotonic() - sent:.1f} s after the metric was sent")
    assert "partial" in text_of(browser) and "hadoop->ats" in text_of(browser)
    follow(browser, "tr[data-seq] a")  # the newest decision's explanation
    until(lambda: "preempt" in text_of(browser), lambda: f"the explanation: {text_of(browser)}", 60)
    check(browser, "decision")

    # a job assigned through the API appears, runs (the executor) and ends, on the open namespace page
    browser.get(site.base + "/namespaces/demo")
    now = int(time.time() * 1000)
    request = urllib.request.Request(site.api + "/namespaces/demo/assignments", method="POST", data=json.dumps(
        {"worker": "w1", "start": now, "end": now, "jobs": [{"external_id": "invoice-7"}]}).encode(),
        headers={"Authorization": f"Bearer {site.tokens['ops']}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        [job] = json.loads(answer.read())["uuids"]
    until(lambda: browser.find_elements("css selector", f"tr[data-job='{job}'][data-event='JobStarted']"),
          lambda: f"the start to appear: {text_of(browser)}", UPDATE_BOUND_S)
    until(lambda: browser.find_elements("css selector", f"tr[data-job='{job}'][data-event='JobFinished']"),
          lambda: f"the end to appear: {text_of(browser)}", UPDATE_BOUND_S + 10)
    check(browser, "namespace")
    follow(browser, f"tr[data-event='JobFinished'] a[href$='{job}']")
    until(lambda: "sent by ops" in text_of(browser), lambda: f"the job's history: {text_of(browser)}", 60)
    check(browser, "job")

    browser.get(site.base + "/groups/g1")
    until(lambda: "taking jobs" in text_of(browser), lambda: f"the group: {text_of(browser)}", 30)
    check(browser, "group")
    browser.get(site.base + "/dead-letters")
    check(browser, "dead-letters")
    follow(browser, "td a")
    until(lambda: "ats" in text_of(browser) and "Redrive" in text_of(browser), "the letters", 20)
    check(browser, "dead-letter")


def test_a_killed_nodes_tasks_move_on_the_job_set_page(site: Site, browser: Any) -> None:
    sign_in(browser, site, "viewer")
    browser.get(site.base + "/job-sets/js")
    nodes = lambda: set(browser.execute_script(  # noqa: E731  (read in one go: a live update may replace the rows)
        "return [...document.querySelectorAll('tr[data-node]')].map(r => r.dataset.node)"))
    until(lambda: nodes() == {"n1", "n2"} and "running" in text_of(browser),
          lambda: f"both nodes in the plan: {text_of(browser)}", 90)
    until(lambda: "1, 2, 3" in text_of(browser), lambda: f"n1's task processes: {text_of(browser)}", 60)
    check(browser, "job-set")
    site.services["n2"].kill()
    until(lambda: nodes() == {"n1"}, lambda: f"n2's tasks to move: {text_of(browser)}", 60)
    until(lambda: "1-6" in text_of(browser) and "running" in text_of(browser),
          lambda: f"n1 to hold every task: {text_of(browser)}", 60)


def test_a_reader_sees_no_admin_action_and_a_forged_one_is_refused(site: Site, browser: Any) -> None:
    sign_in(browser, site, "viewer")
    for path in ("/namespaces/demo", "/dead-letters/" + site.env["TRIBUNAL_TOPIC_PREFIX"]
                 + "plugin_decider.dlq/bad_metric"):
        browser.get(site.base + path)
        assert browser.find_elements("css selector", "form[method=post]") == [], path
        assert "viewer (reader)" in text_of(browser)
    session = browser.get_cookie("tribunal_console")["value"]
    before = _commands(site)
    for headers, body in (({"Cookie": f"tribunal_console={session}"}, b"max=0&csrf=guessed"),
                          ({"Authorization": f"Bearer {site.tokens['viewer']}"}, b"max=0")):
        request = urllib.request.Request(site.base + "/namespaces/demo/max-threads", data=body, method="POST",
                                         headers={**headers, "Content-Type": "application/x-www-form-urlencoded"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 403
    anonymous = urllib.request.Request(site.base + "/namespaces/demo/max-threads", data=b"max=0", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(anonymous, timeout=30)
    assert refused.value.code == 401
    # the admin's session without its page's CSRF token is refused too (a request forged from elsewhere)
    sign_in(browser, site, "ops")
    admin = browser.get_cookie("tribunal_console")["value"]
    request = urllib.request.Request(site.base + "/namespaces/demo/max-threads", data=b"max=0", method="POST",
                                     headers={"Cookie": f"tribunal_console={admin}"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 403
    time.sleep(2)
    assert _commands(site) == before  # nothing written

    browser.get(site.base + "/namespaces/demo")  # the admin's own form does it
    browser.find_element("css selector", "input[name=max]").clear()
    browser.find_element("css selector", "input[name=max]").send_keys("3")
    browser.find_element("css selector", "form[action$='max-threads'] button").click()
    until(lambda: "at most 3 running" in text_of(browser), "the cap to be written", 20)
    until(lambda: _commands(site)[-1] == {"type": "MaxThreadsSet", "namespace": "demo", "max": 3,
                                          "principal": "ops"}, "the cap on the log", 20)

    letters = "/dead-letters/" + site.env["TRIBUNAL_TOPIC_PREFIX"] + "plugin_decider.dlq/bad_metric"
    browser.get(site.base + letters)  # an admin of every namespace redrives: the letter fails again, a new one
    browser.find_element("css selector", "form[action$='redrive'] button").click()
    until(lambda: "redriven: 1" in text_of(browser), lambda: f"the redrive: {text_of(browser)}", 60)
    browser.get(site.base + letters)
    until(lambda: len(browser.find_elements("css selector", "td code")) == 2,
          lambda: f"the letter redriven to fail again: {text_of(browser)}", UPDATE_BOUND_S)


def _commands(site: Site) -> list[dict[str, Any]]:
    tail = tribunal("topics", "tail", "dispatch-commands", "--json", "--from-beginning", "--max", "1000",
                    "--idle-timeout",
                    "3", env=site.env)
    return [json.loads(line)["value"] for line in tail.stdout.splitlines()]
