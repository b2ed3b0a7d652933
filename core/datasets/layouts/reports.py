"""Report-generation layouts (layout ``report_table``, task ``report_generation``): one sample
per image with the report's findings and impression.

* ``details["format"] == "csv"``: CSVs with a findings-like and an impression-like column (or one
  report column) and an image column whose cells name image files (CT-RATE's ``VolumeName,
  Findings_EN, Impressions_EN`` included).
* ``"csv_join"``: the report table has no image column but shares a key column with a second
  table that lists the images (IU-Xray: ``reports.csv`` uid, findings, impression +
  ``projections.csv`` uid, filename, projection). Every image of a report becomes a sample whose
  group is the report key, so one report's images stay on one side of the split.
* ``"json"``: JSON lists of ``{image | image_path | filename: path or [paths], finding(s),
  impression}`` (CT-RATE style nested case folders, RadGenome's ``reports_train.json`` /
  ``reports_test.json``), or one object ``{"train": [...], "val": [...], "test": [...]}`` (R2Gen
  annotation files); a row with several images gives one sample per image grouped by the row.

Split names from file names (``*train*``, ``*valid*``, ``*test*``), object keys or a ``split``
column/field are kept; a dataset with only train and validation sets holds out its validation set.
"""
from __future__ import annotations

import re
from pathlib import Path

from core.datasets.layouts.common import (SPLIT_COLUMNS, FileMatcher, build_result, candidate_files,
                                          common_parent, group_for, group_source, held_out_splits,
                                          load_json, split_cell, split_of_name)
from core.datasets.layouts.tables import read_table
from core.datasets.layouts.types import Sample

REPORT_COLUMN = re.compile(r"^(?:reports?|report_text|radiology_report|report_en)$", re.I)
IMAGE_KEYS = ("image_path", "image_paths", "image", "images", "image_id", "filename",
              "file_name", "file", "path", "volumename", "volume_name", "volume", "img_path",
              "img", "scan")
GROUP_KEYS = ("uid", "study_id", "report_id", "patient_id", "subject_id", "case_id", "patient")
MIN_MATCH = 0.5


def _text_keys(columns) -> tuple[str | None, str | None]:
    """(findings key, impression key): names holding "finding" / "impression" (not a label
    column such as NIH's "Finding Labels"); a lone report column counts as findings."""
    names = [c for c in columns if isinstance(c, str)]
    findings = [c for c in names if "finding" in c.lower() and "label" not in c.lower()]
    impression = [c for c in names if "impression" in c.lower()]
    report = [c for c in names if REPORT_COLUMN.match(c.strip())]
    pick = lambda found: min(sorted(found), key=len) if found else None  # noqa: E731
    return pick(findings) or pick(report), pick(impression)


def _text(row: dict, key: str | None) -> str:
    value = row.get(key) if key else None
    if value is None or isinstance(value, (dict, list)):
        return ""
    text = str(value).strip()
    return "" if text.lower() in ("nan", "none", "null") else text


class _Collector:
    """Samples gathered from every report source, one per image (first report wins)."""

    def __init__(self, root: Path):
        self.root = root
        self.entries: dict[Path, dict] = {}
        self.skipped: list[str] = []
        self.duplicates = 0

    def add(self, path: Path, findings: str, impression: str, split: str, group: str = ""):
        if path in self.entries:
            self.duplicates += 1
            return
        self.entries[path] = {"findings": findings, "impression": impression, "split": split,
                              "group": group}


def _image_column(columns: list[str], rows: list[dict], matcher: FileMatcher) -> tuple[str, int]:
    head = rows[:2000]
    hits = {c: sum(matcher.find(r.get(c)) is not None for r in head) for c in columns}
    best = max(columns, key=lambda c: hits[c]) if columns else ""
    return best, hits.get(best, 0)


def _split_column(columns: list[str]) -> str | None:
    lower = {c.strip().lower(): c for c in columns}
    return next((lower[c] for c in SPLIT_COLUMNS if c in lower), None)


def _csv_reports(root: Path, description: str, matcher: FileMatcher,
                 out: _Collector) -> dict:
    tables = []
    for path in candidate_files(root, (".csv", ".tsv"), description):
        try:
            tables.append((path, *read_table(path)))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
    facts: dict = {}
    for path, columns, rows in sorted(tables):
        findings, impression = _text_keys(columns)
        if not rows or not ((findings and impression) or (findings and
                                                          REPORT_COLUMN.match(findings))):
            continue
        split_col = _split_column(columns)
        file_split = split_of_name(path.name)
        image_col, hits = _image_column(columns, rows, matcher)
        if hits >= MIN_MATCH * min(len(rows), 2000):
            # a study/patient column (IU-Xray's uid: two views share one report) groups rows
            by_name = {re.sub(r"[\s.\-]+", "_", c.strip().lower()): c for c in columns}
            group_col = next((by_name[k] for k in GROUP_KEYS if k in by_name), None)
            for row in rows:
                found = matcher.find(row.get(image_col))
                if found is not None and (_text(row, findings) or _text(row, impression)):
                    split = (split_cell(row.get(split_col, "")) if split_col else "") or \
                        file_split
                    key = str(row.get(group_col, "") or "").strip() if group_col else ""
                    out.add(found, _text(row, findings), _text(row, impression), split,
                            f"{group_col}={key}" if key else "")
            facts.setdefault("format", "csv")
            facts.setdefault("tables", []).append(str(path))
            facts.setdefault("image_column", image_col)
            continue
        joined = _join(path, columns, rows, tables, matcher, out, findings, impression)
        if joined:
            facts.update(joined)
    return facts


def _join(path: Path, columns: list[str], rows: list[dict], tables: list, matcher: FileMatcher,
          out: _Collector, findings: str | None, impression: str | None) -> dict | None:
    """Reports joined to their images through a second table sharing a key column."""
    report_cols = {c.strip().lower(): c for c in columns}
    for other, other_columns, other_rows in sorted(tables):
        if other == path or not other_rows:
            continue
        image_col, hits = _image_column(other_columns, other_rows, matcher)
        if hits < MIN_MATCH * min(len(other_rows), 2000):
            continue
        for key_col in other_columns:
            report_key = report_cols.get(key_col.strip().lower())
            if key_col == image_col or report_key is None:
                continue
            reports = {}
            for row in rows:
                reports.setdefault(str(row.get(report_key, "")).strip(), row)
            keys = [str(r.get(key_col, "")).strip() for r in other_rows]
            if sum(k in reports for k in keys) < MIN_MATCH * len(keys):
                continue
            split_col = _split_column(columns) or _split_column(other_columns)
            file_split = split_of_name(path.name) or split_of_name(other.name)
            no_report = 0
            for row, key in zip(other_rows, keys):
                found = matcher.find(row.get(image_col))
                report = reports.get(key)
                if found is None:
                    continue
                if report is None or not (_text(report, findings) or
                                          _text(report, impression)):
                    no_report += 1
                    out.skipped.append(f"{found}: its report {key_col}={key!r} is missing or "
                                       "empty in " + path.name)
                    continue
                split_value = (report.get(split_col) or row.get(split_col, "")) \
                    if split_col else ""
                split = split_cell(split_value) or file_split
                out.add(found, _text(report, findings), _text(report, impression), split,
                        f"{key_col}={key}")
            return {"format": "csv_join", "tables": [str(path), str(other)],
                    "image_column": image_col, "join_column": key_col,
                    "images_without_report": no_report}
    return None


def _json_rows(data, file_split: str) -> list[tuple[dict, str]]:
    """(row, split) pairs from a list of rows or an object of split-named lists."""
    if isinstance(data, list):
        return [(r, file_split) for r in data if isinstance(r, dict)]
    if isinstance(data, dict) and "annotations" not in data:
        rows = []
        for key, value in data.items():
            if isinstance(value, list) and value and isinstance(value[0], dict):
                split = split_of_name(str(key)) or file_split
                rows.extend((r, split) for r in value if isinstance(r, dict))
        return rows
    return []


def _row_images(row: dict) -> list:
    lower = {k.lower(): k for k in row if isinstance(k, str)}
    key = next((lower[k] for k in IMAGE_KEYS if k in lower), None)
    value = row.get(key) if key else None
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return [value] if isinstance(value, (str, int)) else []


def _json_reports(root: Path, description: str, matcher: FileMatcher,
                  out: _Collector) -> dict:
    facts: dict = {}
    for path in sorted(candidate_files(root, (".json",), description)):
        rows = _json_rows(load_json(path), split_of_name(path.name))
        if not rows:
            continue
        findings, impression = _text_keys({k for r, _ in rows[:200] for k in r})
        if not (findings or impression):
            continue
        used = 0
        for row, split in rows:
            images = _row_images(row)
            f_text, i_text = _text(row, findings), _text(row, impression)
            if not images or not (f_text or i_text):
                continue
            lower = {k.lower(): k for k in row if isinstance(k, str)}
            group_key = next((lower[k] for k in GROUP_KEYS if k in lower), None)
            if group_key is None and len(images) > 1 and "id" in lower:
                group_key = lower["id"]
            group = f"{group_key}={row[group_key]}" if group_key else ""
            if "split" in lower:
                split = split_cell(row.get(lower["split"], "")) or split
            for image in images:
                found = matcher.find(image)
                if found is None:
                    out.skipped.append(f"{path.name}: image {str(image)[:200]!r} not found")
                    continue
                used += 1
                out.add(found, f_text, i_text, split, group)
        if used:
            facts.setdefault("format", "json")
            facts.setdefault("tables", []).append(str(path))
    return facts


def scan_reports(root: Path, images: list[Path], description: str = ""):
    """ScanResult for report JSON files or report tables, or None."""
    if not images:
        return None
    if not candidate_files(root, (".json", ".csv", ".tsv"), description):
        return None
    matcher = FileMatcher(images, root)
    out = _Collector(root)
    facts = _json_reports(root, description, matcher, out)
    csv_facts = _csv_reports(root, description, matcher, out)
    if not out.entries:
        return None
    if not facts:
        facts = csv_facts
    elif csv_facts:
        facts["also"] = csv_facts
    mapping = held_out_splits([e["split"] for e in out.entries.values()])
    samples, sources = [], []
    base = common_parent(list(out.entries), root)
    for path, entry in out.entries.items():
        group, source = (entry["group"], "report key") if entry["group"] else \
            group_for(path, base)
        sources.append(source)
        samples.append(Sample(str(path), "report", group,
                              mapping.get(entry["split"], entry["split"]),
                              extra={"findings": entry["findings"],
                                     "impression": entry["impression"]}))
    skipped = out.skipped[:2000]
    skipped.extend(f"{p}: no report names this image" for p in images
                   if p not in out.entries)
    if out.duplicates:
        skipped.append(f"{out.duplicates} further report rows name an image already reported; "
                       "the first report was kept")
    facts["splits_mapped"] = {k: v for k, v in mapping.items() if k != v}
    return build_result(root, "report_table", "report_generation", samples, len(images), facts,
                        [], skipped, group_source(sources))
