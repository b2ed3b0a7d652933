"""DICOM files under a folder, grouped into series, from their headers only.

A 3D DICOM image is a *series*: the files sharing a ``SeriesInstanceUID``, one slice each,
stacked by position along the slice normal (``core.imaging.dicom.slice_order``; file
names never decide the order). Headers are read with ``stop_before_pixels`` and only the tags
listed in ``HEADER_TAGS``, so grouping thousands of files reads a few KB of each. Files that
are not DICOM are skipped with a reason, never an error.

``write_series_manifests`` turns samples whose series shares its folder with other series into
``<Datapath>/series/<SeriesInstanceUID>.series.json`` manifests (``{"series_instance_uid",
"files": [absolute paths ordered by position], ...}``) that the index then names; the dataset
folder itself is never written.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from core.datasets.datacards import write_json_atomic
from core.datasets.layouts import links
from core.imaging.dicom import slice_order
from core.imaging.refs import ImageReadError, is_dicom_file

HEADER_TAGS = ["PatientID", "StudyInstanceUID", "SeriesInstanceUID", "SeriesNumber",
               "SeriesDescription", "Modality", "Rows", "Columns", "PixelSpacing",
               "SliceThickness", "SpacingBetweenSlices", "ImagePositionPatient",
               "ImageOrientationPatient", "InstanceNumber", "NumberOfFrames", "SamplesPerPixel",
               "SOPClassUID"]
MAX_DICOM_FILES = 500_000
MAX_SKIPPED = 1000  # reasons kept per scan (the count of the rest is not needed)
_UID_RE = re.compile(r"^[0-9.]{1,64}$")


@dataclass
class DicomSeries:
    """One series: its identity, its files ordered by position, and its geometry."""
    series_instance_uid: str
    patient_id: str
    study_instance_uid: str
    modality: str
    description: str
    files: list[str]                 # absolute paths, ordered along the slice normal
    rows: int
    columns: int
    frames: int                      # frames of a single multi-frame file, else 1
    spacing: list[float] | None      # mm along (column, row, slice) = the array's (x, y, z)
    ordered_by: str                  # "position", "instance_number" or "single"
    folders: list[str] = field(default_factory=list)  # the folders holding its files

    @property
    def num_slices(self) -> int:
        return len(self.files) if len(self.files) > 1 else self.frames

    @property
    def is_volume(self) -> bool:
        return self.num_slices > 1


def _walk(root: Path, skipped: list[str]) -> list[Path]:
    found: list[Path] = []
    for folder, dirs, files in links.walk(root):  # bad links skipped
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith(".") or name.upper() == "DICOMDIR":
                continue
            path = Path(folder) / name
            if is_dicom_file(path):
                found.append(path)
            elif len(skipped) < MAX_SKIPPED:
                skipped.append(f"{path}: not a DICOM file")
            if len(found) > MAX_DICOM_FILES:
                raise ValueError(f"more than {MAX_DICOM_FILES} DICOM files under {root}; "
                                 "register a smaller folder")
    return found


def _floats(value) -> list[float] | None:
    try:
        return [float(v) for v in value] if value is not None else None
    except (TypeError, ValueError):
        return None


def _raw(ds, tag) -> str | list[str] | None:
    """A text element's value without pydicom's value conversion (the slow part of reading
    thousands of headers): decoded, stripped, multi-values split on the backslash."""
    element = ds.get_item(tag)
    value = element.value if element is not None else None
    if isinstance(value, bytes):
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:
            text = value.decode("latin-1")
        parts = [v.strip(" \x00") for v in text.split("\\")]
        return parts if len(parts) > 1 else parts[0]
    if value is None or isinstance(value, str):
        return value
    if hasattr(value, "__iter__"):
        return [str(v) for v in value]
    return str(value)


_TAGS: dict = {}


def header_record(ds) -> dict:
    """The few header values grouping needs, as plain Python values."""
    if not _TAGS:
        from pydicom.tag import Tag
        _TAGS.update({name: Tag(name) for name in HEADER_TAGS})

    def text(name: str) -> str:
        value = _raw(ds, _TAGS[name])
        return ("\\".join(value) if isinstance(value, list) else value or "").strip()

    def numbers(name: str) -> list[float] | None:
        value = _raw(ds, _TAGS[name])
        return _floats(value if isinstance(value, list) else [value]) if value else None

    def one(name: str) -> float | None:
        return (numbers(name) or [None])[0]

    return {"uid": text("SeriesInstanceUID"), "patient": text("PatientID"),
            "study": text("StudyInstanceUID"), "modality": text("Modality"),
            "description": text("SeriesDescription"),
            "rows": int(getattr(ds, "Rows", 0) or 0),
            "columns": int(getattr(ds, "Columns", 0) or 0),
            "position": numbers("ImagePositionPatient"),
            "orientation": numbers("ImageOrientationPatient"),
            "pixel_spacing": numbers("PixelSpacing"), "instance": one("InstanceNumber"),
            "frames": int(one("NumberOfFrames") or 1),
            "between": one("SpacingBetweenSlices"), "thickness": one("SliceThickness")}


def read_headers(files: list[Path], skipped: list[str]) -> list[tuple[Path, dict]]:
    """(path, header_record) of each readable DICOM image file; others go to ``skipped``."""
    import pydicom
    from pydicom.errors import InvalidDicomError
    headers = []
    for path in files:
        try:
            ds = pydicom.dcmread(str(path), stop_before_pixels=True, specific_tags=HEADER_TAGS)
            record = header_record(ds)
        except InvalidDicomError:
            skipped.append(f"{path}: not a DICOM file")
            continue
        except Exception as exc:  # truncated, unreadable
            skipped.append(f"{path}: not a readable DICOM file ({type(exc).__name__})")
            continue
        if not record["uid"]:
            skipped.append(f"{path}: DICOM without SeriesInstanceUID")
        elif not record["rows"] or not record["columns"]:
            skipped.append(f"{path}: DICOM without an image (no Rows/Columns; "
                           f"{record['modality'] or 'unknown modality'})")
        else:
            headers.append((path, record))
    return headers


def group_series(headers: list[tuple[Path, dict]], skipped: list[str]) -> list[DicomSeries]:
    """Headers -> series (by SeriesInstanceUID), each ordered by position; a series that cannot
    be one volume (mixed orientations or sizes, repeated positions) is skipped with the reason."""
    by_uid: dict[str, list[tuple[Path, dict]]] = defaultdict(list)
    for path, record in headers:
        by_uid[record["uid"]].append((path, record))
    out: list[DicomSeries] = []
    for uid, members in sorted(by_uid.items()):
        paths = [p for p, _ in members]
        records = [r for _, r in members]
        sizes = {(r["rows"], r["columns"]) for r in records}
        if len(sizes) > 1:
            skipped.append(f"series {uid}: slices of different sizes {sorted(sizes)[:3]} "
                           f"({len(paths)} files under {paths[0].parent})")
            continue
        if len(paths) > 1 and any(r["frames"] > 1 for r in records):
            skipped.append(f"series {uid}: several multi-frame files; not one volume")
            continue
        try:
            order, geometry = slice_order([r["position"] for r in records],
                                          [r["orientation"] for r in records],
                                          [r["instance"] for r in records],
                                          [str(p) for p in paths])
        except ImageReadError as exc:
            skipped.append(f"series {uid} ({len(paths)} files under {paths[0].parent}): {exc}")
            continue
        first = records[order[0]]
        pixel = first["pixel_spacing"]
        spacing = [pixel[1], pixel[0]] if pixel and len(pixel) >= 2 else None
        if spacing and (len(paths) > 1 or first["frames"] > 1):
            # between slices: from the positions, else the header's spacing or thickness
            z = geometry["slice_spacing"] or first["between"] or first["thickness"]
            spacing.append(round(z, 4) if z else 1.0)
        ordered = [str(paths[i]) for i in order]
        out.append(DicomSeries(
            series_instance_uid=uid, patient_id=first["patient"], study_instance_uid=first["study"],
            modality=first["modality"], description=first["description"], files=ordered,
            rows=first["rows"], columns=first["columns"], frames=first["frames"],
            spacing=spacing, ordered_by=geometry["ordered_by"],
            folders=sorted({str(Path(f).parent) for f in ordered})))
    return out


def scan_dicom_series(root: str | os.PathLike,
                      files: list[Path] | None = None) -> tuple[list[DicomSeries], list[str]]:
    """Every DICOM series under ``root`` (read-only, headers only) and the files skipped, each
    with its reason. ``files`` (the DICOM candidates) may be passed when already listed."""
    skipped: list[str] = []
    candidates = files if files is not None else _walk(Path(root).resolve(), skipped)
    return group_series(read_headers(candidates, skipped), skipped), skipped


def find_dicom_files(root: str | os.PathLike,
                     skipped: list[str] | None = None) -> list[Path]:
    """DICOM candidates under ``root``: DICOM suffixes, and other files whose preamble says DICM
    (hidden folders and DICOMDIR index files left out; the rest noted in ``skipped``)."""
    return _walk(Path(root).resolve(), skipped if skipped is not None else [])


# ----------------------------------------------------------------------------- manifests

def manifest_name(uid: str) -> str:
    """``<uid>.series.json``; a UID that is not plain digits and dots gets a hash instead."""
    safe = uid if _UID_RE.match(uid) else "uid-" + hashlib.sha1(uid.encode()).hexdigest()[:20]
    return f"{safe}.series.json"


def write_series_manifests(scan, datapath: str | os.PathLike):
    """For samples whose series shares its folder with other series (``extra["series_files"]``),
    write ``<datapath>/series/<uid>.series.json`` and return a copy of the scan whose samples
    name those manifests as their image. A scan without such samples is returned unchanged."""
    if not any(s.extra.get("series_files") for s in scan.samples):
        return scan
    folder = Path(datapath) / "series"
    folder.mkdir(parents=True, exist_ok=True)
    samples = []
    for sample in scan.samples:
        files = sample.extra.get("series_files")
        if not files:
            samples.append(sample)
            continue
        uid = sample.extra.get("series_instance_uid") or ""
        path = folder / manifest_name(uid or hashlib.sha1("".join(files).encode()).hexdigest())
        write_json_atomic(path, {"series_instance_uid": uid, "files": list(files),
                                 "patient_id": sample.extra.get("patient_id", ""),
                                 "study_instance_uid": sample.extra.get("study_instance_uid", ""),
                                 "modality": sample.extra.get("modality", ""),
                                 "source_folder": str(sample.image)})
        samples.append(dataclasses.replace(sample, image=str(path.resolve())))
    return dataclasses.replace(scan, samples=samples)
