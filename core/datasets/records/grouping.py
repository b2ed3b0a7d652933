"""The patient of each sample from the strongest evidence the folder has: an explicit patient
field in any record source (``patients.csv`` beside ``labels.json``; ``studies.csv`` mapping
each study to its patient) wins over folder levels and guessed name prefixes.

May import: core.datasets.layouts (types, label_table_ids), core.datasets.records.
"""
from __future__ import annotations

from pathlib import Path

from core.datasets.layouts.label_table_ids import IdMatcher
from core.datasets.layouts.types import ScanResult
from core.datasets.records.fields import profile
from core.datasets.records.targets import image_field

MIN_SHARE = 0.5


def _explicit(scan: ScanResult) -> bool:
    source = scan.group_source or ""
    return source.startswith("table column") and "'__" not in source or \
        source.startswith(("DICOM", "report key"))


def patients_from_sources(scan: ScanResult, root: Path) -> ScanResult:
    """``scan`` with its groups taken from a patient field of another record source when its
    own grouping is a guess (folder, name prefix, none) and that field covers at least half
    of its samples; unchanged otherwise."""
    if _explicit(scan) or not scan.samples:
        return scan
    from core.datasets.records.reading import _context
    images, sources, _problems, _files = _context(root)
    if not sources:
        return scan
    matcher = IdMatcher(images, root)
    keys = {s.image for s in scan.samples if isinstance(s.image, str)}
    best = None
    for source in sources:
        infos = profile(source.records)
        patients = [n for n, i in infos.items() if i.role == "patient"]
        if not patients:
            continue
        found = image_field(source, matcher, infos)
        if found is None or found[0] == patients[0]:
            continue
        field, match = found[0], found[1]
        mapping: dict[str, str] = {}
        for record in source.records:
            patient = str(record.get(patients[0], "") or "").strip()
            if not patient:
                continue
            for hit in matcher.find(str(record.get(field, "")), match == "id"):
                if str(hit) in keys:
                    mapping.setdefault(str(hit), patient)
        if len(mapping) >= MIN_SHARE * len(scan.samples) and (
                best is None or len(mapping) > len(best[0])):
            best = (mapping, f"table column {patients[0]!r} of {source.name}")
    if best is None:
        return scan
    mapping, how = best
    for s in scan.samples:
        if isinstance(s.image, str) and s.image in mapping:
            s.group = mapping[s.image]
    scan.group_source = how
    scan.details["grouping_evidence"] = (f"{how}: {len(mapping)} of {len(scan.samples)} "
                                         "samples")
    return scan
