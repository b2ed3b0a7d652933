"""Label tables: a CSV/TSV next to the images, one row per image.

Recognised deterministically (so autopilot and weak LLMs succeed): the *image column* is the one
whose values match image files under the folder (by relative path, file name or stem); the
*label column* is named like a label (label, finding, diagnosis, class, group, target, ...) or
else the column with few distinct values; a *patient column* (patient, subject, ...) becomes the
grouping key. A cell holding several labels ("Effusion|Nodule") makes the dataset multi-label,
and negatives such as "No Finding" become an empty label list.
"""
from __future__ import annotations

import csv
import re
from collections import Counter
from pathlib import Path

TABLE_SUFFIXES = (".csv", ".tsv")
LABEL_NAME = re.compile(r"label|finding|diagnos|class|group|target|category|outcome", re.I)
PATIENT_NAME = re.compile(r"patient|subject|participant|\bpid\b|case", re.I)
NEGATIVES = {"no finding", "no findings", "none", "normal", "negative", "no_finding"}
SEPARATORS = re.compile(r"\s*[|;]\s*")


def _read(path: Path) -> tuple[list[str], list[dict]]:
    with open(path, newline="", encoding="utf-8-sig") as handle:
        sample = handle.read(4096)
        handle.seek(0)
        try:
            dialect = csv.Sniffer().sniff(sample, delimiters=",\t;")
        except csv.Error:  # long free text defeats the sniffer: trust the file's suffix
            dialect = csv.excel_tab if path.suffix.lower() == ".tsv" else csv.excel
        reader = csv.DictReader(handle, dialect=dialect)
        rows = [row for row in reader]
        return list(reader.fieldnames or []), rows


def _file_keys(images: list[Path], root: Path) -> dict[str, Path]:
    keys: dict[str, Path] = {}
    for path in images:
        rel = path.relative_to(root).as_posix()
        stem = path.name.split(".")[0]
        for key in (rel, path.name, stem):
            keys.setdefault(key.lower(), path)
    return keys


def read_label_table(root: Path, images: list[Path]) -> dict | None:
    """Return {"table", "image_column", "label_column", "patient_column", "rows": [(path,
    labels, group)], "multi_label", "unmatched"} for the best matching table, or None."""
    tables = sorted(p for p in root.iterdir() if p.suffix.lower() in TABLE_SUFFIXES)
    keys = _file_keys(images, root)
    best = None
    for table in tables:
        try:
            columns, rows = _read(table)
        except (OSError, csv.Error, UnicodeDecodeError):
            continue
        if not rows:
            continue
        hits = {c: sum(str(r.get(c, "")).strip().lower() in keys for r in rows) for c in columns}
        image_col = max(columns, key=lambda c: hits[c])
        if hits[image_col] < 0.8 * len(rows):
            continue
        others = [c for c in columns if c != image_col]
        named = [c for c in others if LABEL_NAME.search(c)]
        few = sorted(others, key=lambda c: len({r.get(c) for r in rows}))
        label_col = (named or [c for c in few if 1 < len({r.get(c) for r in rows}) <= 50] or
                     [None])[0]
        if label_col is None:
            continue
        patient_col = next((c for c in others if c != label_col and PATIENT_NAME.search(c)), None)
        multi = any(SEPARATORS.search(str(r.get(label_col, "")).strip()) for r in rows)
        out_rows, unmatched = [], 0
        for r in rows:
            path = keys.get(str(r.get(image_col, "")).strip().lower())
            if path is None:
                unmatched += 1
                continue
            raw = [v for v in SEPARATORS.split(str(r.get(label_col, "")).strip()) if v]
            labels = [v for v in raw if v.lower() not in NEGATIVES] if multi else raw[:1]
            group = str(r.get(patient_col, "")).strip() if patient_col else ""
            out_rows.append((path, labels, group))
        candidate = {"table": str(table), "image_column": image_col, "label_column": label_col,
                     "patient_column": patient_col, "rows": out_rows, "multi_label": multi,
                     "unmatched": unmatched}
        if best is None or len(out_rows) > len(best["rows"]):
            best = candidate
    return best


def label_counts(rows: list[tuple[Path, list[str], str]]) -> Counter:
    return Counter(label for _, labels, _ in rows for label in labels)
