"""What a clinician waits for, in real Chromium against `streamlit run app.py` on the demo data:

* cold start to first paint (server start to the chat page drawn);
* chat request -> plan shown (target <= 3 s), median of RUNS;
* approve -> model ready (target <= 2 min on 2 cores), median of RUNS;
* an idle app with the Training page open: the server's CPU (target < 5 % of a core).

Each timing runs with the warm standby worker (core/jobs/standby.py, the app's default) and,
side by side as the baseline, with cold worker starts (M3B_WARM_WORKER=0), printing both and
their ratio. The model-ready timing runs only with the default (warm) set-up.

    python -m bench.ui_timings [--runs 5] [--idle-s 30] [--skip-baseline]   (make bench-ui)
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.app_server import start_app, stop_app  # noqa: E402
from tests.test_browser import _ask, _job, _settle, chromium  # noqa: E402

REQUEST = "classify pneumonia versus normal chest X-rays"
PLAN_TEXT = "The Task Manager proposes this plan"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-dev-shm-usage"]


def wait_finished(home: Path, timeout: float = 900) -> dict:
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = _job(home)
        if job and job["status"] in ("succeeded", "failed", "cancelled", "stopped",
                                     "no_dataset", "interrupted"):
            return job
        time.sleep(0.2)
    raise SystemExit("a job did not finish within 15 min")


def session(browser, home: Path, warm: bool, runs: int, build: bool, idle_s: float,
            out: Path) -> dict:
    """One server: cold start, then ``runs`` request -> plan (-> approve -> model) rounds."""
    started = time.time()
    proc, url = start_app(home, out / f"streamlit-{int(warm)}.log",
                          env={"M3B_WARM_WORKER": "1" if warm else "0"})
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    found: dict = {"plan_s": [], "model_s": []}
    try:
        page.goto(url)
        _settle(page)
        found["first_paint_s"] = time.time() - started
        if warm:  # the standby warms up in the background; a user types for longer than that
            deadline = time.time() + 60
            while "ready" not in (home / "standby.log").read_text(errors="replace") \
                    if (home / "standby.log").exists() else True:
                if time.time() > deadline:
                    break
                time.sleep(0.2)
        for _ in range(runs):
            t0 = time.time()
            _ask(page, REQUEST)
            page.get_by_text(PLAN_TEXT).last.wait_for(timeout=120_000)
            found["plan_s"].append(time.time() - t0)
            approve = page.get_by_role("button", name="Approve", exact=False).last
            if build:
                t1 = time.time()
                approve.click()
                job = wait_finished(home)
                found["model_s"].append(time.time() - t1)
                found.setdefault("metrics", []).append(
                    json.loads(job["result"] or "{}").get("metrics", {}).get("auc"))
            else:
                page.get_by_role("button", name="Cancel", exact=False).last.click()
                wait_finished(home, 120)
            page.goto(url)
            _settle(page)
            if warm:  # the next standby replaces the one just used
                time.sleep(16)
        page.goto(f"{url}/training")
        _settle(page)
        page.wait_for_timeout(5000)
        server = psutil.Process(proc.pid)
        family = [server, *server.children(recursive=True)]
        before = sum(sum(p.cpu_times()[:2]) for p in family)
        time.sleep(idle_s)
        after = sum(sum(p.cpu_times()[:2]) for p in family if p.is_running())
        found["idle_cpu_pct"] = 100.0 * (after - before) / idle_s
    finally:
        page.close()
        stop_app(proc)
    return found


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def main(argv: list[str] | None = None) -> int:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--idle-s", type=float, default=30.0)
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--no-build", action="store_true", help="request -> plan only")
    args = parser.parse_args(argv)
    path = chromium()
    if path is None:
        raise SystemExit("no Chromium: apt-get install chromium")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        results = {}
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
            for warm in ([True] if args.skip_baseline else [True, False]):
                home = out / f"home-{int(warm)}"
                subprocess.run([sys.executable, "-m", "crew", "demo", "--basic", "--home",
                                str(home), "--json"], cwd=REPO, check=True,
                               stdout=subprocess.DEVNULL)
                results[warm] = session(browser, home, warm, args.runs,
                                        build=warm and not args.no_build, idle_s=args.idle_s,
                                        out=out)
            browser.close()
    warm, cold = results[True], results.get(False, {})
    rows = [("cold start to first paint (s)", warm.get("first_paint_s"),
             cold.get("first_paint_s"), "-"),
            (f"request -> plan shown, median of {args.runs} (s)", median(warm["plan_s"]),
             median(cold.get("plan_s", [])), "<= 3"),
            (f"approve -> model ready, median of {args.runs} (s)", median(warm["model_s"]),
             None, "<= 120"),
            ("idle, Training page open (% of a core)", warm.get("idle_cpu_pct"),
             cold.get("idle_cpu_pct"), "< 5")]
    print(f"{'what':<46} {'warm (default)':>14} {'cold baseline':>14} {'ratio':>7}  target")
    for name, value, base, target in rows:
        def fmt(x):
            return "-" if x is None else f"{x:.2f}"
        ratio = f"{value / base:.2f}" if value and base else "-"
        print(f"{name:<46} {fmt(value):>14} {fmt(base):>14} {ratio:>7}  {target}")
    print("plan times (s):", [round(x, 2) for x in warm["plan_s"]],
          "baseline:", [round(x, 2) for x in cold.get("plan_s", [])])
    if warm["model_s"]:
        print("model times (s):", [round(x, 1) for x in warm["model_s"]],
              "AUC:", warm.get("metrics"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
