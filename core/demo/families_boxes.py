"""Layout families with bounding boxes, written the way public detection sets ship them:

* Pascal VOC (``make_pascal_voc``): Kvasir-like colonoscopy frames ``JPEGImages/<id>.jpg``
  (RGB, two frame sizes), one VOC XML per frame in ``Annotations/<id>.xml`` (``<size>``,
  ``<object><name>polyp</name><bndbox>`` with 1-based inclusive ``xmin ymin xmax ymax``; a frame
  without polyp has no ``<object>``), and ``ImageSets/Main/{train,val,trainval,test}.txt``
  (stems) plus VOC's per-class ``polyp_{train,val}.txt`` (``stem  1`` / ``stem -1``). Signal:
  a pale, shaded dome with a dark rim on folded red mucosa; specular glints everywhere.
* YOLO (``make_yolo``): chest X-rays ``images/{train,val}/<patient>_<followup>.png`` (NIH
  ChestX-ray14 names: ``00012345_000``), ``labels/{train,val}/<stem>.txt`` with one
  ``class cx cy w h`` line per nodule (normalised to the image), an empty file for no nodule,
  and ``data.yaml`` (``path``, ``train``, ``val``, ``nc``, ``names`` as a dict). The split is
  patient-disjoint. Signal: round bright nodules in the lung fields.

Synthetic, seeded, small; not patient data.

May import: core.demo and third-party libraries."""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
from PIL import Image

from core.demo.chest_xray import chest_image
from core.demo.detection import _blob, _place
from core.demo.families_common import (disc, group_sizes, random_id, save_rgb, smooth_field,
                                       unique_ids)
from core.demo.writers import finish, prepare, scaled

VOC_SIZES = ((128, 112), (112, 96))      # (width, height) of the two frame kinds
POLYP = "polyp"
NODULE = "nodule"


# -------------------------------------------------------------------------------- Pascal VOC
def colonoscopy_frame(rng: np.random.Generator, w: int, h: int, n_polyps: int):
    """(H, W, 3) RGB in [0, 1] and the polyps as (cy, cx, ry, rx)."""
    yy, xx = np.mgrid[0:h, 0:w]
    folds = np.sin((xx * rng.uniform(0.1, 0.2) + yy * rng.uniform(0.05, 0.15))
                   + 2.0 * smooth_field(rng, h, w, 12))
    shade = 0.75 + 0.12 * folds + 0.08 * smooth_field(rng, h, w, 6)
    base = np.array([0.78, 0.36, 0.30]) * rng.uniform(0.9, 1.1, 3)
    img = shade[..., None] * base
    lumen = disc(h, w, h * rng.uniform(0.3, 0.7), w * rng.uniform(0.3, 0.7), h * 0.12, w * 0.1)
    img[lumen] *= 0.35                                       # dark lumen
    polyps = []
    for _ in range(n_polyps * 30):
        if len(polyps) == n_polyps:
            break
        r = rng.uniform(6.0, 11.0)
        ry, rx = r * rng.uniform(0.85, 1.15), r * rng.uniform(0.85, 1.15)
        cy, cx = rng.uniform(ry + 3, h - ry - 3), rng.uniform(rx + 3, w - rx - 3)
        central = math.hypot((cy - h / 2) / (h * 0.62), (cx - w / 2) / (w * 0.62)) < 0.72
        if central and all(math.hypot(cy - py, cx - px) > r + max(pry, prx) + 6
                           for py, px, pry, prx in polyps):
            polyps.append((cy, cx, ry, rx))
    for cy, cx, ry, rx in polyps:
        d = np.sqrt(((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2)
        rim = (d > 1.0) & (d < 1.25)
        img[rim] *= 0.55                                     # shadow at the base
        dome = d <= 1.0
        light = 1.0 - 0.35 * ((yy - cy + ry * 0.4) ** 2 + (xx - cx + rx * 0.4) ** 2) / (r * r * 2)
        colour = np.array([0.98, 0.7, 0.6]) * rng.uniform(0.92, 1.05)
        img[dome] = (colour * np.clip(light, 0.6, 1.0)[..., None])[dome]
        gy, gx = cy - ry * 0.35, cx - rx * 0.35
        img[np.hypot(yy - gy, xx - gx) < 1.6] = 1.0         # glint on the dome
    for _ in range(int(rng.integers(3, 8))):                 # glints on the mucosa
        gy, gx = rng.uniform(0, h), rng.uniform(0, w)
        img[np.hypot(yy - gy, xx - gx) < rng.uniform(0.8, 1.8)] = 1.0
    field = np.hypot((yy - h / 2) / (h * 0.62), (xx - w / 2) / (w * 0.62))
    img *= np.clip(1.25 - field, 0, 1)[..., None]           # vignette of the endoscope
    img[field > 0.98] = 0.0
    img += rng.normal(0, 0.02, img.shape)
    return np.clip(img, 0, 1), polyps


def voc_xml(stem: str, w: int, h: int, boxes: list[tuple[int, int, int, int]]) -> bytes:
    root = ET.Element("annotation")
    ET.SubElement(root, "folder").text = "JPEGImages"
    ET.SubElement(root, "filename").text = f"{stem}.jpg"
    source = ET.SubElement(root, "source")
    ET.SubElement(source, "database").text = "Colonoscopy polyp frames"
    ET.SubElement(source, "annotation").text = "Pascal VOC"
    size = ET.SubElement(root, "size")
    for tag, value in (("width", w), ("height", h), ("depth", 3)):
        ET.SubElement(size, tag).text = str(value)
    ET.SubElement(root, "segmented").text = "0"
    for xmin, ymin, xmax, ymax in boxes:
        obj = ET.SubElement(root, "object")
        ET.SubElement(obj, "name").text = POLYP
        ET.SubElement(obj, "pose").text = "Unspecified"
        ET.SubElement(obj, "truncated").text = "0"
        ET.SubElement(obj, "difficult").text = "0"
        box = ET.SubElement(obj, "bndbox")
        for tag, value in zip(("xmin", "ymin", "xmax", "ymax"), (xmin, ymin, xmax, ymax)):
            ET.SubElement(box, tag).text = str(value)
    ET.indent(root, space="\t")
    return ET.tostring(root, encoding="utf-8") + b"\n"


def voc_split(n: int) -> dict[str, int]:
    n_test = max(1, round(n * 0.15))
    n_val = max(1, round(n * 0.15))
    return {"train": n - n_val - n_test, "val": n_val, "test": n_test}


def voc_counts(n: int) -> list[int]:
    """Polyps per frame: every seventh frame has none, every fifth (of the rest) two."""
    return [0 if k % 7 == 3 else 2 if k % 5 == 1 else 1 for k in range(n)]


def make_pascal_voc(out_dir: str | Path, seed: int = 0, n: int = 110,
                    scale: float = 1.0) -> Path:
    out = Path(out_dir)
    n = scaled(n, scale, 8)
    spec = {"family": "pascal_voc", "n": n, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    stems = []
    for k, count in enumerate(voc_counts(n)):
        stem = "cju" + random_id(rng, 22)
        w, h = VOC_SIZES[k % 2]
        pixels, polyps = colonoscopy_frame(rng, w, h, count)
        save_rgb(pixels, out / "JPEGImages" / f"{stem}.jpg", quality=95)
        boxes = [(max(1, int(cx - rx) + 1), max(1, int(cy - ry) + 1),
                  min(w, math.ceil(cx + rx)), min(h, math.ceil(cy + ry)))
                 for cy, cx, ry, rx in polyps]
        (out / "Annotations").mkdir(exist_ok=True)
        (out / "Annotations" / f"{stem}.xml").write_bytes(voc_xml(stem, w, h, boxes))
        stems.append((stem, bool(boxes)))
    order = [stems[i] for i in rng.permutation(n)]
    sizes = voc_split(n)
    parts = {"train": order[:sizes["train"]],
             "val": order[sizes["train"]:sizes["train"] + sizes["val"]],
             "test": order[sizes["train"] + sizes["val"]:]}
    parts["trainval"] = parts["train"] + parts["val"]
    main = out / "ImageSets" / "Main"
    main.mkdir(parents=True, exist_ok=True)
    for name, items in parts.items():
        (main / f"{name}.txt").write_text("".join(f"{s}\n" for s, _ in items))
    for name in ("train", "val"):
        (main / f"{POLYP}_{name}.txt").write_text(
            "".join(f"{s} {' 1' if has else '-1'}\n" for s, has in parts[name]))
    return finish(out, spec)


def read_voc(root: Path) -> dict[str, dict]:
    """stem -> {"image", "boxes": [(name, xmin, ymin, xmax, ymax)], "size", "split"}."""
    split_of = {}
    for split in ("train", "val", "test"):
        for stem in (root / "ImageSets" / "Main" / f"{split}.txt").read_text().split():
            split_of[stem] = split
    out = {}
    for xml in sorted((root / "Annotations").glob("*.xml")):
        ann = ET.parse(xml).getroot()
        size = ann.find("size")
        boxes = [(obj.findtext("name"),) + tuple(int(obj.find("bndbox").findtext(t))
                                                for t in ("xmin", "ymin", "xmax", "ymax"))
                 for obj in ann.findall("object")]
        out[xml.stem] = {"image": f"JPEGImages/{ann.findtext('filename')}", "boxes": boxes,
                         "size": (int(size.findtext("width")), int(size.findtext("height"))),
                         "split": split_of.get(xml.stem)}
    return out


# -------------------------------------------------------------------------------------- YOLO
YOLO_SIZE = 96
YOLO_YAML = """\
# Chest X-ray lung nodules, exported in YOLO format (one txt per image, normalised boxes)
path: .
train: images/train
val: images/val
test:
nc: 1
names:
  0: nodule
"""


def yolo_counts(n: int) -> list[int]:
    """Nodules per image: about 30% none, some two."""
    return [0 if k % 10 in (2, 5, 8) else 2 if k % 10 in (3, 9) else 1 for k in range(n)]


def yolo_split(group: int) -> str:
    """Patient-level split: every fifth patient goes to val."""
    return "val" if group % 5 == 2 else "train"


def make_yolo(out_dir: str | Path, seed: int = 0, n: int = 120, scale: float = 1.0) -> Path:
    out = Path(out_dir)
    n = scaled(n, scale, 8)
    spec = {"family": "yolo", "n": n, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    size = YOLO_SIZE
    rr, cc = np.mgrid[0:size, 0:size] + 0.5
    lungs = [(size * 0.5 + s * size * 0.19, size * 0.47) for s in (-1, 1)]  # (x, y)
    groups = group_sizes(n)
    patients = unique_ids(rng, len(groups), 1000, 30000)
    counts = yolo_counts(n)
    k = 0
    for g, (patient, members) in enumerate(zip(patients, groups)):
        split = yolo_split(g)
        for followup in range(members):
            img = chest_image(rng, pneumonia=False, size=size).astype(np.float32) / 255
            nodules = _place(rng, counts[k], lungs, (size * 0.13, size * 0.28), (size, size),
                             (5.0, 8.0))
            lines = []
            for (x, y), r in nodules:
                img += rng.uniform(0.32, 0.42) * _blob([cc, rr], (x, y), r)
                lines.append(f"0 {x / size:.6f} {y / size:.6f} {2 * r / size:.6f} "
                             f"{2 * r / size:.6f}\n")
            stem = f"{patient:08d}_{followup:03d}"
            (out / "images" / split).mkdir(parents=True, exist_ok=True)
            (out / "labels" / split).mkdir(parents=True, exist_ok=True)
            Image.fromarray((np.clip(img, 0, 1) * 255).astype(np.uint8), mode="L").save(
                out / "images" / split / f"{stem}.png")
            (out / "labels" / split / f"{stem}.txt").write_text("".join(lines))
            k += 1
    (out / "data.yaml").write_text(YOLO_YAML)
    return finish(out, spec)


def read_yolo(root: Path) -> dict[str, dict]:
    """relative image path -> {"boxes": [(cls, cx, cy, w, h)], "split", "patient"}."""
    out = {}
    for image in sorted(root.glob("images/*/*.png")):
        split = image.parent.name
        label = root / "labels" / split / f"{image.stem}.txt"
        boxes = [(int(p[0]),) + tuple(float(v) for v in p[1:])
                 for p in (line.split() for line in label.read_text().splitlines()) if p]
        out[str(image.relative_to(root))] = {"boxes": boxes, "split": split,
                                             "patient": image.stem.split("_")[0]}
    return out
