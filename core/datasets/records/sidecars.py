"""Per-image JSON sidecars as one record source: ``x.png`` + ``x.json`` holding the image's
fields (ISIC's ``{"diagnosis": "melanoma", "patient_id": "P7", "age_approx": 60}``).

A JSON file whose stem is the stem of an image file of the folder (beside it, or in a parallel
folder: ``images/x.png`` with ``annotations/x.json``) is a sidecar. Four or more make one
source (``<folder>/*.json``): one record per file, ``__file__`` its path without ``.json`` (which
names its image the way a table cell does) and its fields, nested objects flattened to their
own names; the source's path is its first file. Labelme files (``shapes``: boxes) are the labelme reader's and not read here.
Sidecars are never read as sources of their own (a dozen one-record "tables").

May import: core.datasets.layouts (common, inventory), core.datasets.records.sources.
"""
from __future__ import annotations

from pathlib import Path

from core.datasets.layouts.common import load_json
from core.datasets.layouts.inventory import Inventory, stem_of_name
from core.datasets.layouts.tables import _cell
from core.datasets.records.sources import Source

IMAGE_KINDS = ("image", "tiff", "volume", "dicom")
MIN_SIDECARS = 4
MAX_SIDECARS = 200_000
SOURCE_KIND = "sidecars"


def _fields(data: dict, out: dict | None = None, depth: int = 0) -> dict:
    """A sidecar's fields: nested objects flattened, each field keeping its own name (the
    first of a name wins); lists of texts kept as lists (several labels)."""
    out = {} if out is None else out
    for key, value in data.items():
        if isinstance(value, dict):
            if depth < 3:
                _fields(value, out, depth + 1)
        elif isinstance(value, list):
            if value and all(isinstance(v, (str, int, float)) for v in value):
                out.setdefault(str(key), [str(_cell(v)) for v in value])
        else:
            out.setdefault(str(key), _cell(value))
    return out


def sidecar_source(root: Path, inv: Inventory) -> tuple[Source | None, set[Path]]:
    """(the sidecars' source or None, the JSON files that are sidecars: not to be read as
    sources of their own)."""
    stems = {stem_of_name(p.name).lower() for p in inv.files(*IMAGE_KINDS)}
    found = [p for p in inv.files("annotation") if p.suffix.lower() == ".json"
             and stem_of_name(p.name).lower() in stems]
    if len(found) < MIN_SIDECARS:
        return None, set()
    records, folders, read = [], set(), []
    for path in sorted(found)[:MAX_SIDECARS]:
        data = load_json(path)
        if not isinstance(data, dict) or "shapes" in data:
            continue   # not a record, or labelme boxes
        rel = path.relative_to(root).as_posix()
        records.append({"__file__": rel[: -len(".json")], **_fields(data)})
        folders.add(path.parent.relative_to(root).as_posix())
        read.append(path)
    if len(records) < MIN_SIDECARS:
        return None, set(found)
    name = f"{next(iter(folders))}/*.json" if len(folders) == 1 else "*/*.json"
    return Source(name.removeprefix("./"), read[0], SOURCE_KIND, records), set(found)
