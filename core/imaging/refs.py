"""What an index image reference is and which files stand behind it: the suffix tables,
file.npz::key[i] element references, series manifests, lists of channel references, and the
error every reader raises (ImageReadError).

May import: the standard library and pydicom only."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

RASTER_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")

NIFTI_SUFFIXES = (".nii", ".nii.gz")

ITK_SUFFIXES = (".nrrd", ".nhdr", ".mha", ".mhd")

DICOM_SUFFIXES = (".dcm", ".dicom", ".ima")

PICKLE_SUFFIXES = (".pck", ".pkl", ".pickle")

ARRAY_SUFFIXES = (".npy", ".npz", ".pt", ".pth") + PICKLE_SUFFIXES

MANIFEST_SUFFIX = ".series.json"

# suffixes that are certainly not DICOM: a suffix-less or unknown file is probed for DICOM
NOT_DICOM_SUFFIXES = RASTER_SUFFIXES + NIFTI_SUFFIXES + ITK_SUFFIXES + ARRAY_SUFFIXES + (
    ".json", ".csv", ".tsv", ".txt", ".md", ".xlsx", ".xls", ".xml", ".html", ".pdf", ".zip",
    ".gz", ".raw", ".py", ".yaml", ".yml", ".log", ".ini")

ELEMENT_RE = re.compile(r"^(?P<file>.+?\.(?:npz|npy|pt|pth|pck|pkl|pickle))::"
                        r"(?P<key>[^\[\]]*)(?:\[(?P<index>-?\d+)\])?$", re.IGNORECASE)

PICKLE_REFUSED = ("{ref}: unpickling a file runs code stored in it, so pickled images are "
                  "read only for registered local datasets whose dataloader sets "
                  "ALLOW_PICKLE = True (read_image(..., allow_pickle=True)). Convert the "
                  "arrays to .npy/.npz to avoid this.")


class ImageReadError(ValueError):
    """An image reference cannot be read; the message names the reference and what to do."""


def suffix_of(path: str | os.PathLike) -> str:
    name = Path(path).name.lower()
    if name.endswith(".nii.gz"):
        return ".nii.gz"
    if name.endswith(MANIFEST_SUFFIX):
        return MANIFEST_SUFFIX
    return os.path.splitext(name)[1]


def natural_key(path: Path) -> list:
    """``slice_2`` before ``slice_10``: digit runs compare as numbers."""
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", path.name)]


def is_dicom_file(path: Path) -> bool:
    """A DICOM suffix, or any other not-obviously-other file whose preamble says DICM."""
    suffix = suffix_of(path)
    if suffix in DICOM_SUFFIXES:
        return True
    if suffix in NOT_DICOM_SUFFIXES or path.name.startswith(".") or \
            path.name.upper() == "DICOMDIR":  # a DICOMDIR indexes files; it holds no image
        return False
    from pydicom.misc import is_dicom
    try:
        return is_dicom(str(path))
    except OSError:
        return False


def parse_ref(ref: Any) -> str | list[str]:
    """A path, a list of paths (channels) or a JSON list in a string -> str or list of str."""
    if isinstance(ref, (list, tuple)):
        if not ref:
            raise ImageReadError("an empty list of channel files is not an image")
        return [str(r) for r in ref] if len(ref) > 1 else str(ref[0])
    text = str(ref)
    if text.startswith("[") and text.endswith("]"):
        try:
            items = json.loads(text)
        except json.JSONDecodeError:
            items = None
        if isinstance(items, list) and items and all(isinstance(i, str) for i in items):
            return items if len(items) > 1 else items[0]
    return text


def ref_files(ref: Any) -> list[Path]:
    """The files (or folders) a reference depends on: what must exist for it to be readable."""
    parsed = parse_ref(ref)
    if isinstance(parsed, list):
        return [p for r in parsed for p in ref_files(r)]
    match = ELEMENT_RE.match(parsed)
    return [Path(match.group("file") if match else parsed)]


def ref_exists(ref: Any) -> bool:
    """Whether every file a reference names exists (an element ref: its array file)."""
    return all(p.exists() for p in ref_files(ref))


def read_manifest(path: Path) -> tuple[list[Path], str | None]:
    """The ordered files and series UID of a ``*.series.json`` manifest."""
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ImageReadError(f"{path}: not a readable series manifest ({exc})") from exc
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, list) or not files:
        raise ImageReadError(f"{path}: a series manifest needs a non-empty \"files\" list")
    resolved = [Path(f) if Path(f).is_absolute() else path.parent / f for f in files]
    return resolved, manifest.get("series_instance_uid")
