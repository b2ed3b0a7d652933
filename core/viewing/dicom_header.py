"""The DICOM header of a previewed image, with patient-identifying tags hidden by default.

Hidden unless the caller asks (``show_phi=True``): every element whose keyword is in
``PHI_KEYWORDS`` (names, IDs, birth date, address, physicians, institution, accession number,
study and acquisition dates and times, instance UIDs; chosen after the DICOM PS3.15 basic
confidentiality profile), every element of value representation PN (person name) wherever it
sits, including inside sequences, and every private element (vendors put names and IDs there).
A hidden element keeps its row, with its value replaced, so one can see that it exists.

Headers are read with ``stop_before_pixels``; binary values are shown as their length; rows,
nesting and value lengths are bounded.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from core.privacy.phi import PHI_KEYWORDS, PHI_VRS
from core.imaging.refs import ELEMENT_RE, ImageReadError, is_dicom_file, ref_files, ref_items

HIDDEN = "(hidden: patient-identifying)"
BINARY_VRS = frozenset({"OB", "OD", "OF", "OL", "OV", "OW", "UN"})
MAX_ROWS = 800
MAX_DEPTH = 4
MAX_VALUE_CHARS = 200
MAX_ITEMS = 20  # items shown per sequence


class HeaderError(ValueError):
    """No DICOM header can be shown; the message says why."""


@dataclass
class HeaderView:
    file: str
    rows: list[dict] = field(default_factory=list)  # tag, keyword, name, vr, value, depth
    hidden: int = 0                                  # elements whose value was hidden
    truncated: bool = False                          # more rows than MAX_ROWS


def is_phi(element) -> bool:
    """Whether a pydicom DataElement may identify the patient (see the module docstring)."""
    return (element.keyword in PHI_KEYWORDS or element.VR in PHI_VRS
            or element.tag.is_private)


def dicom_file_of(ref: Any, series_files: Sequence[str] | None = None) -> Path | None:
    """The DICOM file whose header represents an image reference: the file itself, the first
    file of a series (files list, manifest, or folder of slices); None when it is not DICOM."""
    if series_files:
        return Path(series_files[0])
    try:
        first = ref_items(ref)[0]
        files = [] if ELEMENT_RE.match(first) else ref_files(first)
    except ImageReadError:
        return None
    return next((p for p in files if p.is_file() and is_dicom_file(p)), None)


def _value_text(element) -> str:
    value = element.value
    if element.VR in BINARY_VRS or isinstance(value, (bytes, bytearray)):
        return f"<{len(value) if value is not None else 0} bytes>"
    if value is None or value == "":
        return ""
    if isinstance(value, (list, tuple)) or type(value).__name__ == "MultiValue":
        text = "\\".join(str(v) for v in value)
    else:
        text = str(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 1] + "…"


def _walk(dataset, depth: int, show_phi: bool, view: HeaderView) -> None:
    for element in dataset:
        if len(view.rows) >= MAX_ROWS:
            view.truncated = True
            return
        hide = not show_phi and is_phi(element)
        row = {"tag": f"({element.tag.group:04X},{element.tag.element:04X})",
               "keyword": element.keyword or "", "name": element.name, "vr": element.VR,
               "depth": depth}
        if hide:
            view.hidden += 1
            view.rows.append({**row, "value": HIDDEN})
            continue  # a hidden sequence hides its items too
        if element.VR == "SQ":
            items = list(element.value or [])
            view.rows.append({**row, "value": f"<sequence of {len(items)} item(s)>"})
            if depth + 1 < MAX_DEPTH:
                for number, item in enumerate(items[:MAX_ITEMS], start=1):
                    view.rows.append({"tag": "", "keyword": "", "name": f"item {number}",
                                      "vr": "", "depth": depth + 1, "value": ""})
                    _walk(item, depth + 2, show_phi, view)
            continue
        view.rows.append({**row, "value": _value_text(element)})


def dicom_header(path: str | Path, show_phi: bool = False) -> HeaderView:
    """The header of one DICOM file as rows (file meta first). Patient-identifying values are
    hidden unless ``show_phi``. Raises HeaderError for a file that is not readable DICOM."""
    import pydicom
    path = Path(path)
    try:
        ds = pydicom.dcmread(str(path), stop_before_pixels=True)
    except FileNotFoundError:
        raise HeaderError(f"{path} does not exist") from None
    except Exception as exc:  # noqa: BLE001 - pydicom's own errors, shown to the user
        raise HeaderError(f"{path}: not a readable DICOM file ({type(exc).__name__}: "
                          f"{str(exc)[:160]})") from None
    view = HeaderView(file=str(path))
    meta = getattr(ds, "file_meta", None)
    if meta is not None:
        _walk(meta, 0, show_phi, view)
    _walk(ds, 0, show_phi, view)
    return view
