"""Writing helpers shared by the M3Bench-lite generators: a completion marker (so generation is
idempotent and a half-written dataset is rebuilt), NIfTI / PNG / CSV / JSON writers that give the
same bytes for the same data (the tests compare digests of two runs)."""
from __future__ import annotations

import csv
import gzip
import io
import json
import shutil
from pathlib import Path

import nibabel as nib
import numpy as np
from PIL import Image

MARKER = ".m3bench.json"


class GenerationError(RuntimeError):
    """A dataset cannot be generated where asked; the message says why and what to do."""


def prepare(out: Path, spec: dict) -> bool:
    """True when ``out`` already holds a complete dataset of this ``spec`` (nothing to do).
    Otherwise empties a stale generated folder and returns False. A non-empty folder that this
    generator did not write is never touched."""
    marker = out / MARKER
    if marker.exists():
        try:
            if json.loads(marker.read_text()) == spec:
                return True
        except (OSError, json.JSONDecodeError):
            pass
        shutil.rmtree(out)
    elif out.exists() and any(out.iterdir()):
        raise GenerationError(f"{out} exists and was not written by the M3Bench-lite generator; "
                              "give an empty or new folder for the benchmark data")
    out.mkdir(parents=True, exist_ok=True)
    return False


def finish(out: Path, spec: dict) -> Path:
    (out / MARKER).write_text(json.dumps(spec, sort_keys=True))
    return out


def save_nifti(array: np.ndarray, spacing, path: Path, dtype, lps: bool = False) -> None:
    """``array`` in RAS voxel order (x, y, z). LPS cases are stored flipped in x and y with the
    affine that keeps every voxel at its world position, as DICOM converters write them. The
    gzip stream carries no timestamp, so the same volume always gives the same bytes."""
    affine = np.diag([*map(float, spacing), 1.0])
    affine[:3, 3] = [-s * n / 2 for s, n in zip(spacing, array.shape[:3])]
    if lps:
        flip = np.eye(4)
        for axis in (0, 1):
            flip[axis, axis], flip[axis, 3] = -1, array.shape[axis] - 1
        array, affine = array[::-1, ::-1], affine @ flip
    img = nib.Nifti1Image(np.ascontiguousarray(array).astype(dtype), affine)
    img.set_qform(affine, code=1)
    img.set_sform(affine, code=1)
    raw = img.to_bytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".gz"):
        buffer = io.BytesIO()
        with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, filename="") as handle:
            handle.write(raw)
        raw = buffer.getvalue()
    path.write_bytes(raw)


def save_png(pixels: np.ndarray, path: Path, rgb: bool = False, quality: int | None = None) -> None:
    """8-bit grayscale image; ``rgb`` stores it as three equal channels (as many public sets do);
    a JPEG suffix writes JPEG at ``quality``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    img = Image.fromarray(np.asarray(pixels, np.uint8), mode="L")
    if rgb:
        img = img.convert("RGB")
    if path.suffix.lower() in (".jpg", ".jpeg"):
        img.save(path, quality=quality or 92)
    else:
        img.save(path)


def to_uint8(img: np.ndarray) -> np.ndarray:
    return (np.clip(img, 0.0, 1.0) * 255).round().astype(np.uint8)


def write_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def scaled(n: int, scale: float, minimum: int) -> int:
    """Counts shrink with ``scale`` (tests use a tiny scale) but never below ``minimum``."""
    return max(minimum, int(round(n * scale)))


def pick(rng: np.random.Generator, options: list[str]) -> str:
    return options[int(rng.integers(0, len(options)))]
