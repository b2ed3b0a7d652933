"""The app in a real browser: Debian's Chromium driven by Playwright against `streamlit run`.

A first-time user's path: open the app, register a dataset folder through the Datasets form,
ask for a model in the chat, approve the plan, watch curves appear on the Training page, open
the model on the Models page. Screenshots of every page are saved as test artifacts
(``$M3B_TEST_ARTIFACTS``, default ``test-artifacts/`` in the repository) so a reviewer can see
what a clinician sees.

Without a Chromium binary the test is skipped, unless ``M3B_REQUIRE_BROWSER=1`` (set by
``.ci/run``), where a missing browser fails.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from bench.app_server import AppServerError, free_port, start_app, stop_app  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_PATHS = ("/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser")
REQUEST = "classify pneumonia versus normal chest X-rays"
DATASET_NAME = "Browser chest X-ray"


def chromium() -> str | None:
    for path in (os.environ.get("M3B_CHROMIUM"), *CHROMIUM_PATHS, shutil.which("chromium")):
        if path and os.access(path, os.X_OK):
            return path
    return None


def artifacts_dir() -> Path:
    out = Path(os.environ.get("M3B_TEST_ARTIFACTS") or ROOT / "test-artifacts") / "browser"
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture
def browser_path():
    path = chromium()
    if path is None:
        if os.environ.get("M3B_REQUIRE_BROWSER") == "1":
            pytest.fail("no Chromium found: install Debian's `chromium` package (or set "
                        "M3B_CHROMIUM to the browser binary)")
        pytest.skip("no Chromium on this machine (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api")
    return path


@pytest.fixture
def server(tmp_path):
    """`streamlit run app.py` on a free loopback port with its own M3Builder home."""
    home = tmp_path / "home"
    try:
        proc, url = start_app(home, tmp_path / "streamlit.log", timeout_s=90)
    except AppServerError as exc:
        pytest.fail(str(exc))
    yield {"url": url, "home": home, "log": tmp_path / "streamlit.log"}
    stop_app(proc)


def _shot(page, name: str) -> Path:
    path = artifacts_dir() / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def _settle(page, timeout_ms: int = 180_000) -> None:
    """Wait until the page's title is drawn and Streamlit has finished the script run."""
    page.wait_for_selector("[data-testid='stHeadingWithActionElements'] h1", state="visible",
                           timeout=timeout_ms)
    page.wait_for_function(
        "() => !document.querySelector(\"[data-testid='stStatusWidget']\")",
        timeout=timeout_ms)
    page.wait_for_timeout(500)


def _ask(page, text: str, tries: int = 3) -> None:
    """Type into the chat input and send; a send that lands during a rerun can be dropped by
    the browser, so check the message shows up as the user's and send again if not."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in range(tries):
        box = page.get_by_test_id("stChatInputTextArea")
        box.click()
        box.fill(text)
        page.wait_for_timeout(300)
        page.get_by_test_id("stChatInputSubmitButton").click()
        try:
            page.get_by_test_id("stChatMessage").filter(has_text=text).first.wait_for(
                timeout=60_000)
            return
        except PlaywrightTimeout:
            if attempt == tries - 1:
                raise


def _job(home: Path) -> dict | None:
    from core.store.db import open_store
    store = open_store(home / "store.db")
    jobs = store.jobs(limit=5)
    return jobs[0] if jobs else None


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_first_time_user_registers_asks_approves_and_opens_the_model(browser_path, server,
                                                                        tmp_path):
    from playwright.sync_api import expect, sync_playwright

    from core.demo.chest_xray import make_chest_xray_demo

    # small and coarse: training is seconds per epoch, the pages show the same things
    data = make_chest_xray_demo(tmp_path / "hospital_cxr", patients_per_class=24, size=48)
    url, home = server["url"], server["home"]
    shots: list[Path] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=browser_path, headless=True,
                                     args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        try:
            # a direct link to a page still gets the app's menu and sidebar
            page.goto(f"{url}/datasets")
            _settle(page)
            expect(page.get_by_role("heading", name="Datasets")).to_be_visible(timeout=60_000)
            expect(page.get_by_test_id("stSidebarNav")).to_contain_text("Build a model")
            # 1. register the folder through the form: scan, review, validate and save
            page.get_by_label("Folder on the server").fill(str(data))
            page.get_by_label("Name (optional)").fill(DATASET_NAME)
            page.get_by_role("button", name="Scan").click()
            _settle(page)
            expect(page.get_by_role("button", name="Validate and save")).to_be_visible(
                timeout=60_000)
            shots.append(_shot(page, "1_datasets_scanned_draft"))
            page.get_by_role("button", name="Validate and save").click()
            _settle(page, 120_000)
            expect(page.get_by_text("Last validated", exact=False).first).to_be_visible(
                timeout=60_000)
            shots.append(_shot(page, "2_datasets_registered"))
            assert (home / "datacards").exists() and any((home / "datacards").glob("*.json"))

            # 2. ask for a model in the chat and approve the plan
            page.goto(url)
            _settle(page)
            _ask(page, REQUEST)
            approve = page.get_by_role("button", name="Approve", exact=False).first
            expect(approve).to_be_visible(timeout=180_000)
            shots.append(_shot(page, "3_chat_plan_awaiting_approval"))
            expect(page.get_by_text(DATASET_NAME, exact=False).first).to_be_attached()
            approve.click()
            _settle(page)

            # 3. curves appear on the Training page while the model trains
            page.goto(f"{url}/training")
            _settle(page)
            expect(page.locator(".js-plotly-plot").first).to_be_visible(timeout=300_000)
            shots.append(_shot(page, "4_training_curves"))

            # 4. the job finishes; the model page shows its report
            deadline = time.time() + 600
            while time.time() < deadline:
                job = _job(home)
                if job and job["status"] in ("succeeded", "failed", "cancelled", "stopped"):
                    break
                time.sleep(3)
            assert job and job["status"] == "succeeded", job
            page.goto(url)
            _settle(page)
            shots.append(_shot(page, "5_chat_result"))
            page.goto(f"{url}/models")
            _settle(page)
            expect(page.get_by_test_id("stMetricLabel").filter(has_text="AUC").first) \
                .to_be_visible(timeout=60_000)
            expect(page.get_by_test_id("stMain").get_by_text(
                "For research use only", exact=False).first).to_be_visible()
            # the decision: sensitivity/specificity at the threshold, and the calibration
            for label in ("Sensitivity", "Specificity"):
                expect(page.get_by_test_id("stMetricLabel").filter(has_text=label).first) \
                    .to_be_visible(timeout=60_000)
            main = page.get_by_test_id("stMain")
            expect(main.get_by_text("Decision at the threshold").first).to_be_visible()
            expect(main.get_by_text("when its calibrated probability is at least",
                                    exact=False).first).to_be_visible()
            expect(main.locator(".js-plotly-plot").filter(
                has_text="Reliability diagram").first).to_be_visible(timeout=60_000)
            shots.append(_shot(page, "6_models"))
            for name in ("preview", "settings"):
                page.goto(f"{url}/{name}")
                _settle(page)
                shots.append(_shot(page, f"7_{name}"))
        finally:
            if not shots or len(shots) < 8:
                _shot(page, "failure_last_page")
            browser.close()
    assert not errors, errors
    assert all(p.stat().st_size > 10_000 for p in shots), "a screenshot is blank"
