"""The image viewer's slice scrolling speed in real Chromium, against `streamlit run app.py`.

A synthetic CT-like volume (int16 HU, anisotropic spacing, stored LPS like most DICOM-derived
NIfTI) with a liver / spleen mask is opened on the Preview page; when the viewer has it, the
slice is stepped through the viewer's own slice API (what the scrubber and the wheel call),
one slice per animation frame, and through real mouse-wheel events; it prints slices/s
(target: >= 10 on 2 CPU cores with software WebGL), the time from typing the path to the
volume shown, and how long a window preset and one label switched off take to show.

    python -m bench.viewer_scroll [--shape 512 512 300] [--spacing 0.7 0.7 2.5] [--slices 120]

WebGL in headless Chromium without a GPU is SwiftShader (software) through ANGLE. Debian's
Chromium here gives WebGL2 that way even without flags; ``CHROMIUM_ARGS`` asks for it explicitly
(``--use-angle=swiftshader --enable-unsafe-swiftshader``: newer Chromium refuses the software
fallback without the second flag) and adds ``--disable-gpu-compositing`` (the page composited
on the CPU instead of through SwiftShader: about twice the frame rate of a large page here).
The test tests/test_browser_viewer.py uses the same set-up on a small volume.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CHROMIUM_ARGS = ["--no-sandbox", "--disable-dev-shm-usage", "--use-angle=swiftshader",
                 "--enable-unsafe-swiftshader", "--ignore-gpu-blocklist",
                 "--disable-gpu-compositing"]
LABELS = ["liver", "spleen"]
SERVER_PATH = "A file or folder on this server"

# one slice per animation frame through the viewer's slice API; returns slices/s
STEP_JS = """async ([count, axis]) => {
  const v = window.m3bViewer
  const n = v.sliceCount(axis)
  const start = v.currentSlice(axis)
  const frame = () => new Promise((resolve) => requestAnimationFrame(resolve))
  await frame()
  const t0 = performance.now()
  for (let i = 1; i <= count; i++) {
    v.setSlice((start + i) % n, axis)
    await frame()
  }
  const seconds = (performance.now() - t0) / 1000
  return { slices: count, seconds, perSecond: count / seconds, sliceCount: n }
}"""

# a window preset and one label switched off, each until the frame after it is shown (ms)
CHANGE_JS = """async () => {
  const v = window.m3bViewer
  const shown = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))
  await shown()
  let t = performance.now()
  v.setWindow(2000, 500)
  await shown()
  const windowMs = performance.now() - t
  t = performance.now()
  v.toggleLabel('mask', 2, false)
  await shown()
  const label = performance.now() - t
  v.toggleLabel('mask', 2, true)
  return { windowMs: Math.round(windowMs), labelMs: Math.round(label) }
}"""


# ----------------------------------------------------------------------------- data

def _ellipsoid(x, y, z, centre, radii):
    return ((x - centre[0]) / radii[0]) ** 2 + ((y - centre[1]) / radii[1]) ** 2 + \
        ((z - centre[2]) / radii[2]) ** 2 <= 1.0


def synthetic_ct(folder: str | Path, shape=(512, 512, 300), spacing=(0.7, 0.7, 2.5),
                 seed: int = 0, lps: bool = True, compress: bool = False,
                 case: int = 0) -> tuple[Path, Path]:
    """A CT-like int16 volume (air, fat, soft tissue, lungs above the liver, a spine of bone)
    and a mask (1 liver on the patient's right, 2 spleen on the left) in the layout of the
    segmentation demo (images/, masks/, labels.json). Shapes are round in mm, so a viewer
    that ignores the spacing shows them squashed. Returns (image, mask) paths."""
    folder = Path(folder)
    for sub in ("images", "masks"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    import nibabel as nib
    nx, ny, nz = shape
    sx, sy, sz = spacing
    fov = (nx * sx, ny * sy, nz * sz)
    x = ((np.arange(nx) + 0.5) * sx - fov[0] / 2)[:, None]   # mm; +x: the patient's right
    y = ((np.arange(ny) + 0.5) * sy - fov[1] / 2)[None, :]   # +y: anterior
    rng = np.random.default_rng(seed)
    image = np.empty(shape, np.int16)
    mask = np.zeros(shape, np.uint8)
    liver = ((0.17 * fov[0], 0.03 * fov[1], -0.05 * fov[2]),
             (0.13 * fov[0], 0.11 * fov[1], 0.2 * fov[2]))
    spleen = ((-0.2 * fov[0], -0.05 * fov[1], 0.0), (0.06 * fov[0], 0.06 * fov[1],
                                                       0.12 * fov[2]))
    body = (x / (0.44 * fov[0])) ** 2 + (y / (0.34 * fov[1])) ** 2 <= 1.0
    inner = (x / (0.42 * fov[0])) ** 2 + (y / (0.32 * fov[1])) ** 2 <= 1.0
    spine = (x / (0.06 * fov[0])) ** 2 + ((y + 0.22 * fov[1]) / (0.06 * fov[0])) ** 2 <= 1.0
    for k in range(nz):
        z = (k + 0.5) * sz - fov[2] / 2
        plane = np.full((nx, ny), -1000.0, np.float32)
        plane[body] = -90.0
        plane[inner] = 35.0
        if z > 0.18 * fov[2]:
            for side in (-1, 1):
                lung = ((x - side * 0.18 * fov[0]) / (0.13 * fov[0])) ** 2 + \
                    ((y - 0.02 * fov[1]) / (0.2 * fov[1])) ** 2 <= 1.0
                plane[lung & inner] = -850.0
        plane[spine & inner] = 700.0
        organs = np.zeros((nx, ny), np.uint8)
        for value, (centre, radii) in ((1, liver), (2, spleen)):
            if abs(z - centre[2]) <= radii[2]:
                organs[_ellipsoid(x, y, z, centre, radii) & inner] = value
        plane[organs == 1] = 60.0
        plane[organs == 2] = 45.0
        plane += rng.normal(0.0, 12.0, plane.shape).astype(np.float32)
        image[:, :, k] = np.rint(plane)
        mask[:, :, k] = organs
    affine = np.diag([sx, sy, sz, 1.0])
    affine[:3, 3] = [-fov[0] / 2 + sx / 2, -fov[1] / 2 + sy / 2, -fov[2] / 2 + sz / 2]
    if lps:  # stored as most DICOM-derived files are: x and y running the other way
        image, mask = image[::-1, ::-1], mask[::-1, ::-1]
        affine = affine @ _flip_xy(nx, ny)
    suffix = ".nii.gz" if compress else ".nii"
    image_path = folder / "images" / f"case_{case:03d}{suffix}"
    mask_path = folder / "masks" / f"case_{case:03d}.nii.gz"
    nib.save(nib.Nifti1Image(np.ascontiguousarray(image), affine), str(image_path))
    nib.save(nib.Nifti1Image(np.ascontiguousarray(mask), affine), str(mask_path))
    (folder / "labels.json").write_text(json.dumps(LABELS))
    return image_path, mask_path


def _flip_xy(nx: int, ny: int) -> np.ndarray:
    """Voxel (i, j, k) of the flipped array -> voxel (nx-1-i, ny-1-j, k) of the RAS one."""
    flip = np.diag([-1.0, -1.0, 1.0, 1.0])
    flip[:2, 3] = [nx - 1, ny - 1]
    return flip


# ----------------------------------------------------------------------------- the browser

def viewer_frame(page, timeout_s: float = 120):
    """The viewer component's frame (its iframe is served from the app's /component/ path)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        for frame in page.frames:
            if "/component/" in frame.url and "m3b_viewer" in frame.url:
                return frame
        page.wait_for_timeout(250)
    raise TimeoutError("the viewer's frame did not appear")


def wait_ready(frame, key: str | None = None, timeout_s: float = 600) -> None:
    """Until the viewer shows a volume (a new one, when ``key`` is the previous one)."""
    frame.wait_for_function(
        "(old) => window.m3bViewer && (window.m3bViewer.error || (window.m3bViewer.ready && "
        "window.m3bViewer.key !== old))", arg=key, timeout=timeout_s * 1000)
    error = frame.evaluate("() => window.m3bViewer.error")
    if error:
        raise RuntimeError(f"the viewer failed: {error}")


def open_server_path(page, url: str, image: Path, mask: Path | None) -> None:
    """The Preview page with an image (and mask) typed as a path on the server."""
    from tests.test_browser import _settle
    page.goto(f"{url}/preview")
    _settle(page)
    page.get_by_text(SERVER_PATH).click()
    _settle(page)
    if mask is not None:
        page.get_by_role("textbox", name="Mask (optional)").fill(str(mask))
    field = page.get_by_role("textbox", name="Image on the server")
    field.fill(str(image))
    field.press("Enter")


def wheel_slices(page, frame, events: int = 30) -> dict:
    """Real wheel events over the axial tile: slices moved and slices/s."""
    box = page.locator("iframe[title*='m3b_viewer']").bounding_box()
    tile = frame.evaluate("""() => {
      const nv = window.m3bViewer.nv
      const s = nv.screenSlices.find((t) => t.axCorSag === 0)
      const dpr = nv.uiData.dpr || 1
      const [l, t, w, h] = s.leftTopWidthHeight
      const r = nv.canvas.getBoundingClientRect()
      return [r.left + (l + w / 2) / dpr, r.top + (t + h / 2) / dpr]
    }""")
    page.mouse.move(box["x"] + tile[0], box["y"] + tile[1])
    page.wait_for_timeout(300)
    before = frame.evaluate("() => window.m3bViewer.currentSlice(2)")
    t0 = time.perf_counter()
    for _ in range(events):
        page.mouse.wheel(0, -100)
        frame.evaluate("() => new Promise((r) => requestAnimationFrame(r))")
    seconds = time.perf_counter() - t0
    after = frame.evaluate("() => window.m3bViewer.currentSlice(2)")
    moved = abs(after - before)
    return {"events": events, "moved": moved, "seconds": seconds,
            "perSecond": moved / seconds if seconds else math.inf}


# ----------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", type=int, nargs=3, default=[512, 512, 300])
    parser.add_argument("--spacing", type=float, nargs=3, default=[0.7, 0.7, 2.5])
    parser.add_argument("--slices", type=int, default=120, help="slices stepped through")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from tests.test_browser import chromium
    browser_path = chromium()
    if browser_path is None:
        print("no Chromium found (apt-get install chromium)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="m3b-viewer-bench-") as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        image, mask = synthetic_ct(tmp / "ct", tuple(args.shape), tuple(args.spacing))
        made = time.perf_counter() - t0
        from bench.app_server import start_app, stop_app
        proc, url = start_app(tmp / "home", tmp / "streamlit.log")
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=browser_path, headless=True,
                                             args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                t0, typed = time.perf_counter(), time.time()
                open_server_path(page, url, image, mask)
                frame = viewer_frame(page)
                wait_ready(frame)
                shown = time.perf_counter() - t0
                page.wait_for_timeout(500)
                timings = frame.evaluate("() => window.m3bViewer.timings")
                arrived = timings.pop("startedAt") / 1000 - typed
                page.wait_for_timeout(500)
                step = frame.evaluate(STEP_JS, [args.slices, 2])
                wheel = wheel_slices(page, frame)
                change = frame.evaluate(CHANGE_JS)
                browser.close()
        finally:
            stop_app(proc)
    result = {"shape": args.shape, "spacing": args.spacing, "volume_written_s": round(made, 1),
              "path_to_viewer_s": round(shown, 1), "path_to_bytes_in_browser_s": round(arrived, 1),
              "browser_ms": timings,
              "slices_per_s": round(step["perSecond"], 1),
              "slices_stepped": step["slices"], "wheel_slices_per_s": round(wheel["perSecond"], 1),
              "wheel_events": wheel["events"], "wheel_slices_moved": wheel["moved"],
              "window_change_ms": change["windowMs"], "label_toggle_ms": change["labelMs"]}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"volume {' x '.join(map(str, args.shape))} int16, spacing "
              f"{' x '.join(map(str, args.spacing))} mm, with a 2-label mask")
        print(f"path typed -> volume shown in the viewer: {shown:.1f} s (bytes in the browser "
              f"after {arrived:.1f} s; then in the browser, ms: {timings})")
        print(f"slice scrolling (slice API, one slice per frame): {step['perSecond']:.1f} "
              f"slices/s over {step['slices']} slices (target >= 10)")
        print(f"mouse wheel: {wheel['moved']} slices for {wheel['events']} events, "
              f"{wheel['perSecond']:.1f} slices/s")
        print(f"window preset changed: {change['windowMs']} ms to the next frame; one label "
              f"switched off: {change['labelMs']} ms")
    return 0 if step["perSecond"] >= 10 else 1


if __name__ == "__main__":
    raise SystemExit(main())
