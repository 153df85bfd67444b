"""The e2e stack: a real broker, the control plane under uvicorn on a fresh SQLite database, and
Debian's Chromium driven by Playwright (installed with apt when missing; never ``playwright install``).

The server runs ``config.test_settings`` (Celery eager), so provisioning reaches the broker inside
the request that asked for it and the tests need no worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import free_port
from tests.integration.broker.conftest import REPO_ROOT, BrokerProcess

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PASSWORD = "console-e2e-pass"
# Set to a directory (e.g. docs/console) to save screenshots of the main pages while the tests run.
SCREENSHOTS = os.environ.get("MQCLOUD_CONSOLE_SCREENSHOTS", "")


def _install_chromium() -> None:
    """Debian's chromium package, as root or through passwordless sudo."""
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run([*sudo, "apt-get", "update", "-qq"], check=False, env=env, timeout=300)
    subprocess.run([*sudo, "apt-get", "install", "-y", "-qq", "chromium"], check=False, env=env, timeout=900)
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is needed for the e2e tests and could not be installed")


@dataclass
class Stack:
    url: str
    broker: BrokerProcess
    access_key: str
    secret_key: str
    log: Path
    env: dict[str, str]

    def logs(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""

    def run_task(self, name: str) -> None:
        """Run a Celery beat task (e.g. ``sample_group_lag_task``) once, against the stack's database."""
        code = f"from tenants import tasks; tasks.{name}.apply().get()"
        manage = [sys.executable, str(REPO_ROOT / "manage.py"), "shell", "-c", code]
        subprocess.run(manage, cwd=REPO_ROOT, env=self.env, check=True, timeout=120, capture_output=True)


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("console-e2e")
    # metrics on: the overview's storage card reads the broker's Prometheus endpoint
    broker = BrokerProcess(root / "broker", free_port(), metrics_listen=f"127.0.0.1:{free_port()}")
    broker.start()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="config.test_settings",
        MQ_DATA_DIR=str(root / "data"),
        MQ_SECURE_COOKIES="0",
        MQ_SSL_REDIRECT="0",
        SECRET_KEY="e2e-" + "x" * 60,
        PYTHONUNBUFFERED="1",
    )
    log = root / "server.log"
    server: subprocess.Popen[bytes] | None = None
    try:
        manage = [sys.executable, str(REPO_ROOT / "manage.py")]
        subprocess.run(
            [*manage, "migrate", "--noinput", "-v0"], cwd=REPO_ROOT, env=env, check=True, timeout=180
        )
        seeded = subprocess.run(
            [
                sys.executable,
                str(Path(__file__).parent / "seed_stack.py"),
                broker.target,
                broker.metrics_listen,
            ],
            cwd=REPO_ROOT,
            env=env,
            check=True,
            timeout=120,
            capture_output=True,
            text=True,
        )
        credentials = json.loads(seeded.stdout.strip().splitlines()[-1])
        with open(log, "wb") as out:
            server = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "config.asgi:application",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--lifespan",
                    "off",
                    "--no-access-log",
                ],
                cwd=REPO_ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/api/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the control plane did not start:\n" + log.read_text(errors="replace"))
            time.sleep(0.2)
        yield Stack(url, broker, credentials["access_key"], credentials["secret_key"], log, env)
    finally:
        if server is not None and server.poll() is None:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(5)
        broker.kill()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Module scope, not session: Playwright's sync API keeps an asyncio loop marked as running in
    the main thread while it is open, and pytest-asyncio tests run later in the session fail with
    "Cannot run the event loop while another loop is running"."""
    if not Path(CHROMIUM).exists():
        _install_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any, stack: Stack) -> Iterator[Any]:
    """A fresh browser context (no cookies) at 1280 px; dialogs (confirmations) are accepted."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=stack.url)
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())
    yield page
    context.close()


def sign_in(page: Any, username: str) -> None:
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


def screenshot(page: Any, name: str) -> None:
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SCREENSHOTS) / f"{name}.png"), full_page=True)


def csrf_post(page: Any, path: str, form: dict[str, str]) -> Any:
    """POST a form from the signed-in page's session (with its CSRF token), as a hand-made request would."""
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    return page.request.post(path, form=form, headers={"X-CSRFToken": token, "Referer": page.url})
