"""The Preview page's interactive viewer in real Chromium (Debian's, driven by Playwright)
against `streamlit run app.py`, offline.

A small CT-like volume (int16 HU, 0.7 x 0.7 x 2.5 mm, stored LPS) with a liver / spleen mask is
registered as a dataset and opened on the Preview page. The viewer must show three views in
patient orientation (the patient's right on the viewer's left) with the aspect ratio of the
stored spacing, the mask overlay, a label switched off without a Streamlit rerun, CT window
presets, distances in mm and ROI statistics in HU, and step through slices at >= 10 slices/s;
and no request may leave 127.0.0.1. Screenshots go to ``$M3B_TEST_ARTIFACTS/browser/``.

WebGL2 in headless Chromium: there is no GPU here; Chromium draws WebGL with SwiftShader
(software) through ANGLE. Debian's Chromium does so even without flags; the test passes
``--use-angle=swiftshader --enable-unsafe-swiftshader`` (newer Chromium refuses the software
fallback without the second) and ``--disable-gpu-compositing`` (about twice the frame rate): see
bench/viewer_scroll.py, which measures scrolling on a 512 x 512 x 300 CT.
"""
from __future__ import annotations

import io
import json
import os

import numpy as np
import pytest

from bench.viewer_scroll import (CHROMIUM_ARGS, STEP_JS, synthetic_ct, viewer_frame,
                                 wait_ready)
from tests.test_browser import ROOT, _settle, artifacts_dir, browser_path, server  # noqa: F401

LIBRARY = ROOT / "components" / "viewer" / "node_modules" / "@niivue" / "niivue" / "build" / \
    "index.min.js"

SHAPE, SPACING = (128, 128, 48), (0.7, 0.7, 2.5)
LIVER, SPLEEN = (230, 25, 75), (60, 180, 75)  # the static view's label colours

TILES_JS = """() => {
  const nv = window.m3bViewer.nv
  return nv.screenSlices.filter((s) => s.axCorSag <= 2).map((s) => ({
    view: s.axCorSag, ltwh: Array.from(s.leftTopWidthHeight) }))
}"""


def _colour_centres(pixels: np.ndarray, box) -> dict:
    """Mean column of the pixels tinted by each label inside a tile (None when absent)."""
    left, top, width, height = (int(round(v)) for v in box)
    tile = pixels[top:top + height, left:left + width].astype(int)
    r, g, b = tile[..., 0], tile[..., 1], tile[..., 2]
    found = {}
    for name, hit in (("liver", (r - g > 50) & (r - b > 30)),
                      ("spleen", (g - r > 30) & (g - b > 20))):
        cols = np.nonzero(hit)[1]
        found[name] = (float(cols.mean()) / width, int(hit.sum())) if cols.size else (None, 0)
    return found


def _canvas_pixels(frame) -> np.ndarray:
    from PIL import Image
    png = frame.locator("#gl").screenshot()
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def _tile(tiles, view):
    return next(t["ltwh"] for t in tiles if t["view"] == view)


def _on_page(page, frame, point) -> tuple[float, float]:
    """A canvas point (CSS pixels of the canvas) in the page's coordinates."""
    box = page.locator("iframe[title*='m3b_viewer']").bounding_box()
    canvas = frame.evaluate("() => { const r = document.getElementById('gl')"
                            ".getBoundingClientRect(); return [r.left, r.top] }")
    return box["x"] + canvas[0] + point[0], box["y"] + canvas[1] + point[1]


def _drag(page, frame, start, end, steps: int = 8) -> None:
    """A left-button drag between two canvas points."""
    page.mouse.move(*_on_page(page, frame, start))
    page.mouse.down()
    page.mouse.move(*_on_page(page, frame, end), steps=steps)
    page.mouse.up()


@pytest.fixture
def viewer_library():
    if not LIBRARY.is_file():
        if os.environ.get("M3B_REQUIRE_BROWSER") == "1":
            pytest.fail("the viewer's library is not installed: run `make setup`")
        pytest.skip("the viewer's library is not installed (make setup)")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_viewer_shows_a_ct_in_three_views_with_its_mask(browser_path, viewer_library,  # noqa: F811
                                                        server, tmp_path, monkeypatch):
    from playwright.sync_api import sync_playwright

    from core.datasets.registration import register_dataset
    from tests.test_app import context

    folder = tmp_path / "abdomen_ct"
    for case in range(4):  # registration wants 4 cases to train and test
        synthetic_ct(folder, SHAPE, SPACING, seed=case, case=case, compress=True)
    monkeypatch.setenv("M3B_HOME", str(server["home"]))
    settings, store = context()
    result = register_dataset(settings, store, str(folder), "Synthetic abdomen CT",
                              "Abdominal CT volumes with liver and spleen masks")
    assert result["status"] == "registered", result.get("errors")

    url = server["url"]
    requests: list[str] = []
    sent_while_toggling: list[str] = []
    errors: list[str] = []
    measures: dict = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=browser_path, headless=True,
                                     args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1500})
        page.on("request", lambda r: requests.append(r.url))
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        sockets = []
        page.on("websocket", lambda ws: sockets.append(ws))
        try:
            page.goto(f"{url}/preview")
            _settle(page)
            frame = viewer_frame(page)
            wait_ready(frame, timeout_s=180)
            page.wait_for_timeout(800)
            state = frame.evaluate("""() => ({
              volumes: window.m3bViewer.nv.volumes.length, view: window.m3bViewer.view,
              drawing: Boolean(window.m3bViewer.nv.drawBitmap),
              nearest: window.m3bViewer.nv.opts.isNearestInterpolation,
              layers: window.m3bViewer.layers(), window: window.m3bViewer.window(),
              webgl2: Boolean(window.m3bViewer.nv.gl) })""")
            # the image as a volume, the mask as Niivue's label drawing on the same grid
            assert state["webgl2"] and state["volumes"] == 1 and state["drawing"]
            assert state["view"] == "multi" and state["layers"][0]["kind"] == "drawing"
            assert state["nearest"] is False  # enlarged smoothly, no pixel blocks
            assert [lbl["name"] for lbl in state["layers"][0]["labels"]] == ["liver", "spleen"]
            assert state["window"] == pytest.approx([400, 40])  # CT soft tissue

            # three views, each with the aspect ratio of the stored spacing (mm, not voxels)
            tiles = frame.evaluate(TILES_JS)
            assert sorted(t["view"] for t in tiles) == [0, 1, 2]
            fov = [n * s for n, s in zip(SHAPE, SPACING)]
            expected = {0: fov[0] / fov[1], 1: fov[0] / fov[2], 2: fov[1] / fov[2]}
            for t in tiles:
                width, height = t["ltwh"][2], t["ltwh"][3]
                assert width / height == pytest.approx(expected[t["view"]], rel=0.03), t

            # the mask over the image, the patient's right (liver) on the viewer's left
            page.screenshot(path=str(artifacts_dir() / "viewer_ct_three_views.png"),
                            full_page=True)
            pixels = _canvas_pixels(frame)
            axial = _colour_centres(pixels, _tile(tiles, 0))
            assert axial["liver"][1] > 30 and axial["spleen"][1] > 10, axial
            assert axial["liver"][0] < 0.5 < axial["spleen"][0], axial
            coronal = _colour_centres(pixels, _tile(tiles, 1))
            assert coronal["liver"][1] > 30 and coronal["liver"][0] < 0.5, coronal

            # one label off, in the component's own code: no message to the server (a rerun
            # would be a message on the app's websocket)
            assert sockets
            for ws in sockets:
                ws.on("framesent", lambda payload: sent_while_toggling.append("sent"))
            frame.locator("#layers input[data-value='2']").uncheck()
            page.wait_for_timeout(600)
            centres = _colour_centres(_canvas_pixels(frame), _tile(tiles, 0))
            assert centres["spleen"][1] == 0 and centres["liver"][1] > 30
            assert sent_while_toggling == []
            frame.locator("#layers input[data-value='2']").check()

            # window presets (HU)
            frame.locator("#preset").select_option("CT bone")
            assert frame.evaluate("() => window.m3bViewer.window()") == \
                pytest.approx([2000, 500])
            frame.locator("#preset").select_option("CT soft tissue / abdomen")

            # window/level by dragging with the right button (any tool)
            axial = _tile(tiles, 0)
            middle = (axial[0] + axial[2] / 2, axial[1] + axial[3] / 2)
            page.mouse.move(*_on_page(page, frame, middle))
            page.mouse.down(button="right")
            page.mouse.move(*_on_page(page, frame, (middle[0] + 60, middle[1] + 30)), steps=6)
            page.mouse.up(button="right")
            page.wait_for_timeout(300)
            assert frame.evaluate("() => window.m3bViewer.window()") != pytest.approx([400, 40])
            assert "W " in frame.locator("#wl").inner_text()

            # the scrubber moves the axial slice
            frame.locator("#slice").fill("10")
            assert frame.evaluate("() => window.m3bViewer.currentSlice(2)") == 10
            assert frame.locator("#slice-text").inner_text() == f"11 / {SHAPE[2]}"

            # zoom (buttons, Ctrl + wheel) and pan (drag with the Pan tool), then Reset
            zoom = "() => window.m3bViewer.nv.scene.pan2Dxyzmm[3]"
            frame.locator("#zoom-in").click()
            assert frame.evaluate(zoom) == pytest.approx(1.25)
            page.mouse.move(*_on_page(page, frame, middle))
            page.keyboard.down("Control")
            page.mouse.wheel(0, -100)
            page.keyboard.up("Control")
            page.wait_for_timeout(200)
            assert frame.evaluate(zoom) == pytest.approx(1.25 * 1.1)
            frame.locator("#tools [data-tool='pan']").click()
            _drag(page, frame, middle, (middle[0] + 40, middle[1] + 20))
            assert frame.evaluate("() => window.m3bViewer.nv.scene.pan2Dxyzmm.slice(0, 3)"
                                  ".some((v) => Math.abs(v) > 1)")
            frame.locator("#reset").click()
            assert frame.evaluate("() => Array.from(window.m3bViewer.nv.scene.pan2Dxyzmm)") == \
                [0, 0, 0, 1]
            frame.locator("#tools [data-tool='crosshair']").click()

            # the mouse wheel scrolls slices; stepping is fast enough
            axial = _tile(tiles, 0)
            page.mouse.move(*_on_page(page, frame, (axial[0] + axial[2] / 2,
                                                    axial[1] + axial[3] / 2)))
            before = frame.evaluate("() => window.m3bViewer.currentSlice(2)")
            for _ in range(5):
                page.mouse.wheel(0, -100)
                page.wait_for_timeout(80)
            after = frame.evaluate("() => window.m3bViewer.currentSlice(2)")
            assert after != before
            step = frame.evaluate(STEP_JS, [40, 2])
            measures["slices_per_s"] = step["perSecond"]
            assert step["perSecond"] >= 10, step

            # distance in mm: a horizontal drag across the axial view
            frame.locator("#tools [data-tool='measure']").click()
            tiles = frame.evaluate(TILES_JS)
            axial = _tile(tiles, 0)
            y = axial[1] + axial[3] * 0.5
            x0, x1 = axial[0] + axial[2] * 0.25, axial[0] + axial[2] * 0.75
            _drag(page, frame, (x0, y), (x1, y))
            page.wait_for_timeout(300)
            distance = frame.evaluate("() => window.m3bViewer.lastDistance")
            expected_mm = (x1 - x0) * fov[0] / axial[2]
            measures["distance_mm"] = distance
            assert distance == pytest.approx(expected_mm, rel=0.03)
            assert any(r.startswith("Distance") and "mm" in r
                       for r in frame.evaluate("() => window.m3bViewer.results"))

            # ROI statistics in HU inside the liver (60 HU, noise 12)
            frame.locator("#tools [data-tool='roi']").click()
            frame.evaluate("""(focus) => {
              const v = window.m3bViewer
              v.nv.scene.crosshairPos = Float32Array.from(focus); v.nv.drawScene()
            }""", _liver_centre_frac(folder))
            liver = _colour_centres(_canvas_pixels(frame), axial)
            lx = axial[0] + axial[2] * liver["liver"][0]
            _drag(page, frame, (lx - 12, y - 12), (lx + 12, y + 12))
            page.wait_for_timeout(300)
            roi = frame.evaluate("() => window.m3bViewer.lastRoi")
            measures["roi"] = roi and {k: roi[k] for k in ("mean", "stdev", "nvox", "area")}
            assert roi and roi["nvox"] > 5 and roi["mean"] == pytest.approx(60, abs=8), roi
            page.screenshot(path=str(artifacts_dir() / "viewer_ct_measurements.png"),
                            full_page=True)
        finally:
            if errors:
                page.screenshot(path=str(artifacts_dir() / "viewer_failure.png"), full_page=True)
            browser.close()
    (artifacts_dir() / "viewer_measures.json").write_text(json.dumps(measures, indent=1))
    assert not errors, errors
    outside = [r for r in requests if not r.startswith((url, "blob:", "data:", "about:"))]
    assert not outside, outside  # everything came from the app itself


def _liver_centre_frac(folder) -> list[float]:
    """Where the crosshair goes for the ROI: the liver's centre as fractions of the display
    (RAS) grid of case 0."""
    import nibabel as nib
    mask = nib.as_closest_canonical(nib.load(str(folder / "masks" / "case_000.nii.gz")))
    values = np.asarray(mask.dataobj)
    centre = np.argwhere(values == 1).mean(0)
    return [(c + 0.5) / n for c, n in zip(centre, values.shape)]

