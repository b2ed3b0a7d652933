"""Annotations kept one file per image, beside it or in a parallel folder, with the image's stem.
(Per-image JSON files of fields — ISIC's metadata — are a record source of the records engine:
core.datasets.records.sidecars.)

* ``labelme`` (detection, layout ``box_table``): labelme JSON (``shapes`` with ``label`` and
  ``points``); a rectangle or polygon gives its bounding box.
* ``text_reports`` (report generation, layout ``report_table``): ``x.png`` + ``x.txt`` holding a
  report, or one report text (``report.txt``, ``findings.txt``) in a study folder beside its
  image(s); ``FINDINGS:`` and ``IMPRESSION:`` sections are split when present. Files of numbers
  only (YOLO boxes) are not reports.

Sidecars are found by stem in the same folder, else in a sibling folder of annotations
(``images/x.png`` ↔ ``annotations/x.json``) when the stem is unique in the dataset.

May import: core.datasets.layouts.boxes, .common, .inventory, .types.
"""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from core.datasets.layouts.boxes import boxes_result
from core.datasets.layouts.common import (build_result, common_parent, group_for, group_source,
                                          held_out_splits, load_json, split_of_path)
from core.datasets.layouts.inventory import stem_of_name, take_inventory
from core.datasets.layouts.types import Sample, all_images

MAX_SIDECAR_BYTES = 2_000_000
MAX_REPORT_BYTES = 200_000
MAX_STUDY_IMAGES = 8  # a folder with more images and one text holds notes, not a study report
SECTION = re.compile(r"^\s*(findings|impression|conclusion|indication|comparison|technique|"
                     r"history|clinical history)\s*:?\s*", re.I | re.M)


def _pairs(root: Path, kind: str, suffixes: tuple[str, ...]) -> list[tuple[Path, Path]]:
    """(image, sidecar) by stem: beside the image, else a unique stem elsewhere."""
    inv = take_inventory(root)
    sidecars = [p for p in inv.files(kind) if p.name.lower().endswith(suffixes)]
    if not sidecars:
        return []
    by_stem: dict[str, list[Path]] = defaultdict(list)
    for path in sidecars:
        by_stem[stem_of_name(path.name).lower()].append(path)
    beside = set(sidecars)
    pairs = []
    for image in all_images(root):
        stem = stem_of_name(image.name).lower()
        here = [image.parent / (stem_of_name(image.name) + s) for s in suffixes]
        found = next((p for p in here if p in beside), None)
        if found is None and len(by_stem.get(stem, [])) == 1:
            found = by_stem[stem][0]
        if found is not None:
            pairs.append((image, found))
    return pairs


def _load(path: Path) -> dict | None:
    try:
        if path.stat().st_size > MAX_SIDECAR_BYTES:
            return None
    except OSError:
        return None
    data = load_json(path)
    return data if isinstance(data, dict) else None


def scan_labelme(root: Path, top_dirs, top_files, description: str = ""):
    """Boxes from labelme JSON sidecars, or None."""
    pairs = _pairs(root, "annotation", (".json",))
    per_image: dict[Path, dict] = {}
    skipped: list[str] = []
    for image, sidecar in pairs:
        data = _load(sidecar)
        if data is None or not isinstance(data.get("shapes"), list):
            continue
        entry = per_image.setdefault(image, {"boxes": [], "labels": [],
                                             "split": split_of_path(image, root)})
        for shape in data["shapes"]:
            points = shape.get("points") if isinstance(shape, dict) else None
            try:
                xs = [float(p[0]) for p in points]
                ys = [float(p[1]) for p in points]
            except (TypeError, ValueError, IndexError):
                skipped.append(f"{sidecar}: a shape without usable points; dropped")
                continue
            if len(xs) < 2 or max(xs) <= min(xs) or max(ys) <= min(ys):
                skipped.append(f"{sidecar}: a {shape.get('label')!r} shape has no extent")
                continue
            entry["boxes"].append([min(xs), min(ys), max(xs), max(ys)])
            entry["labels"].append(str(shape.get("label") or "object"))
    if len(per_image) < 2:
        return None
    first = next(s for i, s in pairs if i in per_image)
    details = {"format": "labelme_json", "table": str(first), "three_d": False,
               "source": f"labelme JSON per image ({first.parent.relative_to(root)}/)"}
    return boxes_result(root, {"images": per_image, "details": details}, all_images(root),
                        skipped)


def _report_text(path: Path) -> tuple[str, str] | None:
    """(findings, impression) of a report text, or None when it is not prose."""
    try:
        if path.stat().st_size > MAX_REPORT_BYTES:
            return None
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    if len(re.findall(r"[A-Za-z]{3,}", text)) < 3:
        return None  # numbers only (YOLO boxes) or a bare label
    parts = SECTION.split(text)
    if len(parts) < 3:
        return " ".join(text.split()), ""
    sections = {parts[i].lower(): " ".join(parts[i + 1].split())
                for i in range(1, len(parts) - 1, 2)}
    findings = sections.get("findings", "")
    impression = sections.get("impression") or sections.get("conclusion", "")
    if not findings and not impression:
        return " ".join(text.split()), ""
    return findings, impression


def scan_text_reports(root: Path, top_dirs, top_files, description: str = ""):
    """One report text per image or per study folder, or None."""
    inv = take_inventory(root)
    texts = inv.files("text")
    if not texts:
        return None
    images = all_images(root)
    text_set = set(texts)
    per_folder: dict[Path, list[Path]] = defaultdict(list)
    for path in texts:
        per_folder[path.parent].append(path)
    images_in: dict[Path, list[Path]] = defaultdict(list)
    for image in images:
        images_in[image.parent].append(image)
    entries: dict[Path, tuple[Path, str]] = {}  # image -> (report file, group)
    for image in images:
        same = image.with_name(stem_of_name(image.name) + ".txt")
        if same in text_set:
            entries[image] = (same, "")
            continue
        here = per_folder.get(image.parent, [])
        if len(here) == 1 and image.parent != root and \
                len(images_in[image.parent]) <= MAX_STUDY_IMAGES:  # the study folder's report
            entries[image] = (here[0], image.parent.name)
    if len(entries) < max(4, 0.3 * len(images)):
        return None
    samples, sources, skipped = [], [], []
    mapping = held_out_splits([split_of_path(i, root) for i in entries])
    base = common_parent(list(entries), root)
    reports: dict[Path, tuple[str, str] | None] = {}
    for image, (report, study) in sorted(entries.items()):
        if report not in reports:
            reports[report] = _report_text(report)
        text = reports[report]
        if text is None:
            continue
        group, source = (study, "study folder") if study else group_for(image, base)
        sources.append(source)
        split = split_of_path(image, root)
        samples.append(Sample(str(image), "report", group, mapping.get(split, split),
                              extra={"findings": text[0], "impression": text[1]}))
    if len(samples) < max(4, 0.5 * len(entries)):
        return None
    skipped += [f"{p}: no report text beside it" for p in images if p not in entries][:2000]
    per_study = any(study for _, study in entries.values())
    details = {"format": "text_files", "num_reports": len(reports),
               "source": "one report text per study folder" if per_study else
               "one report .txt per image (same name)"}
    return build_result(root, "report_table", "report_generation", samples, len(images),
                        details, [], skipped, group_source(sources))
