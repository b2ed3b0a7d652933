"""What an index image reference is and which files stand behind it: the suffix tables,
file.npz::key[i] element references, series manifests, lists of channel references, the error
every reader raises (ImageReadError), and ``ref_files``: the one answer to "which files does
this reference read?" that hashing, existence checks, previews and caches all use.

May import: the standard library and pydicom only."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

RASTER_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".gif")   # GIF: DRIVE masks

NIFTI_SUFFIXES = (".nii", ".nii.gz")

ITK_SUFFIXES = (".nrrd", ".nhdr", ".mha", ".mhd", ".hdr")   # .hdr: Analyze 7.5 (+ .img)

DICOM_SUFFIXES = (".dcm", ".dicom", ".ima")

PICKLE_SUFFIXES = (".pck", ".pkl", ".pickle")

ARRAY_SUFFIXES = (".npy", ".npz", ".pt", ".pth", ".h5", ".hdf5") + PICKLE_SUFFIXES

MANIFEST_SUFFIX = ".series.json"

# suffixes that are certainly not DICOM: a suffix-less or unknown file is probed for DICOM
NOT_DICOM_SUFFIXES = RASTER_SUFFIXES + NIFTI_SUFFIXES + ITK_SUFFIXES + ARRAY_SUFFIXES + (
    ".json", ".csv", ".tsv", ".txt", ".md", ".xlsx", ".xls", ".xml", ".html", ".pdf", ".zip",
    ".gz", ".raw", ".py", ".yaml", ".yml", ".log", ".ini")

ELEMENT_RE = re.compile(r"^(?P<file>.+?\.(?:npz|npy|pt|pth|pck|pkl|pickle|h5|hdf5))::"
                        r"(?P<key>[^\[\]]*)(?:\[(?P<index>-?\d+)\])?$", re.IGNORECASE)

PICKLE_REFUSED = ("{ref}: unpickling a file runs code stored in it, so pickled images are "
                  "read only for registered local datasets whose dataloader sets "
                  "ALLOW_PICKLE = True (read_image(..., allow_pickle=True)). Convert the "
                  "arrays to .npy/.npz to avoid this.")


class ImageReadError(ValueError):
    """An image reference cannot be read; the message names the reference and what to do."""


class MissingImageFile(ImageReadError, FileNotFoundError):
    """A file an image reference names does not exist; the message names the file."""


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


def ref_items(ref: Any) -> list[str]:
    """The single references inside ``ref``, in order: a (nested) list or tuple of channel
    references, or the JSON text of one (as a dict-keyed index stores it), flattened; anything
    else is one reference (a file, a folder of slices, ``file.npz::key[i]``, a manifest)."""
    if isinstance(ref, (list, tuple)):
        if not ref:
            raise ImageReadError("an empty list of channel files is not an image")
        return [item for r in ref for item in ref_items(r)]
    if ref is None:
        raise ImageReadError("no image reference given (None)")
    parsed = parse_ref(os.fspath(ref) if isinstance(ref, os.PathLike) else ref)
    if isinstance(parsed, list):
        return [item for r in parsed for item in ref_items(r)]
    if not parsed.strip():
        raise ImageReadError("an empty image reference names no file")
    return [parsed]


def folder_slices(folder: Path) -> list[Path]:
    """The 2D slices of a folder read as one 3D image: its PNG/JPEG/BMP/TIFF files in
    natural-number order of their names, else its DICOM files (hidden files left out).
    Raises ImageReadError when it holds neither."""
    try:
        entries = [p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")]
    except OSError as exc:
        raise ImageReadError(f"{folder}: the folder cannot be listed "
                             f"({exc.strerror or exc})") from exc
    raster = sorted((p for p in entries if suffix_of(p) in RASTER_SUFFIXES), key=natural_key)
    if raster:
        return raster
    dicoms = sorted((p for p in entries if is_dicom_file(p)), key=natural_key)
    if dicoms:
        return dicoms
    raise ImageReadError(f"no image slices in folder {folder} (PNG/JPEG/BMP/TIFF or DICOM files)")


def _files_of_one(item: str, manifests: bool) -> list[Path]:
    match = ELEMENT_RE.match(item)
    path = Path(match.group("file") if match else item).expanduser()
    if not path.exists():
        where = f" (the array file {item} points into)" if match else ""
        raise MissingImageFile(f"{path} does not exist{where}. Check the path, or index the "
                               "dataset again if its files moved")
    if match:
        return [path]
    if path.is_dir():
        return folder_slices(path)
    if suffix_of(path) == MANIFEST_SUFFIX:
        files, _ = read_manifest(path)
        gone = [f for f in files if not f.exists()]
        if gone:
            raise MissingImageFile(f"{gone[0]} does not exist ({len(gone)} of the {len(files)} "
                                   f"DICOM files listed in the series manifest {path} are "
                                   "missing). Restore them, or index the dataset again")
        return ([path] if manifests else []) + files
    return [path]


def ref_files(ref: Any, manifests: bool = False) -> list[Path]:
    """Every file an index image reference (or label_path) reads, each once, in order:

    * a file -> itself; ``file.npz::key[i]`` (any ELEMENT_RE reference) -> the array file;
    * a folder of slices -> its slice files (``folder_slices``);
    * a ``*.series.json`` manifest -> the DICOM files it lists (with ``manifests``, the
      manifest itself first: it is index data, written in the job's Datapath);
    * a list (nested, or its JSON text) of any of these -> all their files.

    Raises MissingImageFile (an ImageReadError and a FileNotFoundError) naming the first file
    that does not exist, and ImageReadError for a reference that names no files (an empty
    folder, an unreadable manifest)."""
    seen: set[Path] = set()
    out: list[Path] = []
    for item in ref_items(ref):
        for path in _files_of_one(item, manifests):
            if path not in seen:
                seen.add(path)
                out.append(path)
    return out


def ref_exists(ref: Any) -> bool:
    """Whether every file a reference reads exists (``ref_files`` raises nothing)."""
    try:
        ref_files(ref)
    except ImageReadError:
        return False
    return True


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
