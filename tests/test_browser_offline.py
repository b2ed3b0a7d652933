"""The app works offline: in real Chromium (the fixtures of tests/test_browser.py), every request
every page makes goes to the app's own server on 127.0.0.1 — the favicon included, which a
``:material/...:`` page icon would fetch from a font host. Requests to anywhere else are
recorded and refused, as a hospital network without internet access would."""
from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.test_browser import _settle, _shot, browser_path, server  # noqa: F401 (fixtures)

PAGES = ("", "datasets", "preview", "training", "models", "settings")
LOCAL_SCHEMES = ("data", "blob", "about")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_every_page_loads_everything_from_the_app_server(browser_path, server, monkeypatch):
    from playwright.sync_api import sync_playwright

    from core.config.settings import get_settings
    from crew.demo import ensure_demo

    monkeypatch.setenv("M3B_HOME", str(server["home"]))
    monkeypatch.delenv("M3B_LLM", raising=False)
    assert ensure_demo(get_settings())["status"] == "registered"  # images on Preview
    url = server["url"]
    outside: list[str] = []
    seen: list[str] = []

    def guard(route):
        target = route.request.url
        seen.append(target)
        parts = urlsplit(target)
        if parts.scheme in LOCAL_SCHEMES or parts.hostname == "127.0.0.1":
            route.continue_()
        else:
            outside.append(target)
            route.abort()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=browser_path, headless=True,
                                     args=["--no-sandbox", "--disable-dev-shm-usage"])
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.route("**/*", guard)
        page = context.new_page()
        try:
            for name in PAGES:
                page.goto(f"{url}/{name}")
                _settle(page, 120_000)
                page.wait_for_timeout(1500)  # late requests: fonts, the favicon, chart assets
                _shot(page, f"offline_{name or 'chat'}")
            icon = page.evaluate(
                "() => [...document.querySelectorAll(\"link[rel~='icon']\")].map(l => l.href)")
        finally:
            browser.close()
    assert not outside, f"requests left the app server: {sorted(set(outside))}"
    assert icon and all(urlsplit(h).hostname == "127.0.0.1" for h in icon), icon
    assert any(urlsplit(h).path.startswith("/media/") for h in icon), \
        f"the favicon is the app's own file, served by the app: {icon}"
    assert len(seen) > 20, seen  # the guard did see the page's own requests
