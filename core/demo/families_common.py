"""Helpers shared by the layout-family generators (core.demo.families_*): patient group sizes
that are a fixed function of the sample count (so the expected reading is known without
generating), random-looking identifiers from a seeded generator, deterministic zip containers
(xlsx, npz) and colour image writers.

May import: core.demo and third-party libraries."""
from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image

# images per patient, cycled: most patients have one image, some two or three
GROUP_PATTERN = (1, 2, 1, 3, 1, 2)
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def group_sizes(n: int, pattern: tuple[int, ...] = GROUP_PATTERN) -> list[int]:
    """Sizes of consecutive patient groups that add up to ``n`` (the pattern, cycled; the last
    group is cut short)."""
    sizes, total, k = [], 0, 0
    while total < n:
        size = min(pattern[k % len(pattern)], n - total)
        sizes.append(size)
        total += size
        k += 1
    return sizes


def random_id(rng: np.random.Generator, length: int,
              alphabet: str = "abcdefghijklmnopqrstuvwxyz0123456789") -> str:
    return "".join(alphabet[i] for i in rng.integers(0, len(alphabet), length))


def unique_ids(rng: np.random.Generator, count: int, low: int, high: int) -> list[int]:
    """``count`` distinct integers in [low, high), in random order."""
    return [int(v) for v in rng.choice(np.arange(low, high), size=count, replace=False)]


def freeze_zip(path: Path, edit=None) -> None:
    """Rewrite a zip container (xlsx, npz) with fixed member timestamps, so the same content
    always gives the same bytes; ``edit(name, data) -> data`` may rewrite a member (an xlsx's
    save time in docProps/core.xml)."""
    with zipfile.ZipFile(path) as src:
        members = [(info.filename, src.read(info.filename), info.compress_type)
                   for info in src.infolist()]
    if edit is not None:
        members = [(name, edit(name, data), compress) for name, data, compress in members]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as dst:
        for name, data, compress in members:        # keep the order ([Content_Types] first)
            info = zipfile.ZipInfo(name, date_time=ZIP_EPOCH)
            info.compress_type = compress
            info.external_attr = 0o644 << 16
            dst.writestr(info, data)
    path.write_bytes(buffer.getvalue())


def save_rgb(pixels: np.ndarray, path: Path, quality: int = 92) -> None:
    """(H, W, 3) floats in [0, 1] as an 8-bit RGB image (JPEG by suffix)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    img = Image.fromarray((np.clip(pixels, 0, 1) * 255).round().astype(np.uint8), mode="RGB")
    if path.suffix.lower() in (".jpg", ".jpeg"):
        img.save(path, quality=quality)
    else:
        img.save(path)


def smooth_field(rng: np.random.Generator, h: int, w: int, cell: int) -> np.ndarray:
    """Smooth noise (about unit spread) at the scale of ``cell`` pixels, any aspect ratio."""
    coarse = rng.normal(size=(h // cell + 2, w // cell + 2)).astype(np.float32)
    img = Image.fromarray(coarse, mode="F").resize((w, h), Image.BICUBIC)
    return np.asarray(img, dtype=np.float32)


def disc(h: int, w: int, cy: float, cx: float, ry: float, rx: float,
         wobble: np.ndarray | None = None) -> np.ndarray:
    """A filled ellipse; ``wobble`` (an (h, w) field) makes its border irregular."""
    yy, xx = np.mgrid[0:h, 0:w]
    dist = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2
    if wobble is not None:
        dist = dist + wobble
    return dist <= 1.0
