"""Label tables: one row per image (or per scan) in whichever table format the clinic keeps.

Formats: CSV, TSV, XLSX, JSON (a list of records, ``{image: label}``, ``{image: {field: ..}}``
or ``{"train": [records], "test": [records]}``) and JSONL. Tables at the top of the dataset
folder and one folder down are tried; the table that labels the most images wins, and tables
named for a split (``train.csv`` / ``test.csv``, ``labels_val.xlsx``) are merged, their split
kept.

Everything is decided deterministically (autopilot has no LLM), helped by the datacard
description when it names columns or code meanings:

* the *image column* is the column whose values name image files: a relative path (from the
  dataset or from another root: the longest unambiguous trailing part is used), a file name, a
  stem, a scan folder of slices, or an ID that is a run of tokens of the file stem (ADNI's
  ``I12345`` matches ``I12345.pt`` and ``ADNI_..._I12345.pt``); an ID naming several files
  labels each of them;
* the *labels*: the column the description names ("label column: Group", "'aclDiagnosis' holds
  the label"); else several 0/1 columns (one-hot: single-label when every row has exactly one
  1, multi-label otherwise); else a column named like a label; else a column with few values.
  Integer codes take their names from the description ("0 = healthy, 1 = partial tear",
  "coded 0 for a healthy knee, 1 for ..."), or stay as code strings. Cells holding several
  labels ("A|B", "A;B", a quoted "A,B", a JSON list) make the dataset multi-label, and negatives
  such as "No Finding" become an empty label list;
* a *patient column* (Patient ID, subject, participant, ...) becomes the group key, else a
  patient prefix of the file name or its case folder;
* a *split column* (split / set / subset / fold holding train/val/test) is kept as the split.

Rows that name no file, and files no row names, are reported in ``skipped``. Which file a cell
names is label_table_ids' IdMatcher; how the columns are chosen is label_table_columns.

May import: core.datasets.layouts.label_table_columns, .label_table_ids, .tables, .common,
.array_headers, .types.
"""
from __future__ import annotations

import csv
import os
from collections import Counter
from pathlib import Path

from core.datasets.layouts.array_headers import array_shape, dimension_of_shape
from core.datasets.layouts.common import group_for, group_source, held_out_splits, split_of_name
from core.datasets.layouts.label_table_columns import (TRUE_CELLS, as_code, choose_image_column,
                                                       patient_column, plan_labels, row_labels,
                                                       split_column)
from core.datasets.layouts.label_table_ids import IdMatcher
from core.datasets.layouts.hints import read_hints
from core.datasets.layouts.tables import (CODE, NEGATIVES, SEPARATORS, code_mapping,
                                          find_tables, read_sheets)
from core.datasets.layouts.types import (FORMAT_OF_SUFFIX, SPLIT_VALUES, Sample, ScanResult,
                                         all_images, image_suffix)

MAX_CLASSES = 200
BOX_COLUMNS = [("x", "y", "w", "h"), ("x0", "y0", "x1", "y1"), ("xmin", "ymin", "xmax", "ymax")]


# --------------------------------------------------------------------------- one table
def _read_one_table(table: Path, matcher: IdMatcher, num_images: int,
                    description: str) -> dict | None:
    """The best-labelling sheet of ``table`` (every sheet of a workbook is tried: the first is
    often notes; a sheet the description names wins a tie)."""
    try:
        sheets = read_sheets(table)
    except (OSError, ValueError, csv.Error, UnicodeDecodeError, ImportError):
        return None
    hints = read_hints(description)
    found = []
    for sheet, columns, rows in sheets:
        got = read_rows(table, columns, rows, matcher, num_images, description)
        if got is not None:
            got["sheet"] = sheet if len(sheets) > 1 else None
            found.append((len({e[0] for e in got["entries"]}),
                          bool(sheet and hints.mentions(sheet)), got))
    if not found:
        return None
    return max(found, key=lambda f: (f[0], f[1]))[2]


def read_rows(table: Path, columns: list[str], rows: list[dict], matcher: IdMatcher,
              num_images: int, description: str, table_split: str | None = None
              ) -> dict | None:
    """Labels of ``images`` from one table's rows (a file, a sheet, or rows gathered from
    per-image sidecar files); None when the rows do not label these images."""
    if not rows or not columns:
        return None
    lower = {c.lower() for c in columns}
    if any(set(box) <= lower for box in BOX_COLUMNS) or "impression" in lower:
        return None  # a box table (detection) or a report table
    chosen = choose_image_column(columns, rows, matcher, num_images)
    if chosen is None:
        return None
    image_col, use_ids = chosen
    split_col = split_column([c for c in columns if c != image_col], rows)
    patient_col = patient_column(columns, rows, {image_col, split_col})
    plan = plan_labels(columns, rows, {image_col, split_col, patient_col}, description, matcher)
    if plan is None:
        return None
    if patient_col is None:  # only now: the description never turns the labels into patients
        patient_col = patient_column(columns, rows, {image_col, split_col, *plan["columns"]},
                                     description)
    label_col = plan["columns"][0]
    if plan["form"] == "one_hot":
        multi = any(sum(str(r.get(c, "")).lower() in TRUE_CELLS for c in plan["columns"]) != 1
                    for r in rows)
        names: dict[str, str] = {}
        form = "one_hot_multi" if multi else "one_hot"
    else:
        cells = [r.get(label_col, "") for r in rows]
        multi = any(isinstance(v, list) or SEPARATORS.search(v) for v in cells)
        values = {v for c in cells for v in (c if isinstance(c, list) else [c]) if v}
        codes = bool(values) and all(CODE.match(v) for v in values)
        names = code_mapping(description, sorted(values)) if codes else {}
        form = "multi_label_cells" if multi else "codes" if codes else "column"
    table_split = split_of_name(table.name) if table_split is None else table_split
    entries, unmatched, unlabelled = [], [], []
    for number, row in enumerate(rows, start=2):
        value = row.get(image_col, "")
        paths = matcher.find(value, use_ids)
        if not paths:
            unmatched.append(f"{table.name} row {number}: {str(value)[:80]!r} names no image file")
            continue
        labels = row_labels(row, plan, multi, names)
        if labels is None:
            unlabelled.append(f"{table.name} row {number}: no label")
            continue
        split = SPLIT_VALUES.get(str(row.get(split_col, "")).strip().lower(), "") if split_col \
            else table_split
        group = str(row.get(patient_col, "")).strip() if patient_col else ""
        entries += [(path, labels, group, split) for path in paths]
    found = {lbl for e in entries for lbl in e[1]}
    if not entries or len(found) < (1 if multi else 2):
        return None  # one class only: not what labels these images (class folders may)
    if len(found) > MAX_CLASSES or (len(entries) >= 20 and len(found) > 0.5 * len(entries)):
        return None  # free text (reports) or IDs, not a small set of classes
    if plan["form"] == "one_hot":
        order = [c for c in plan["columns"] if not (multi and c.lower() in NEGATIVES)]
    elif form == "codes":
        order = [names.get(c, c) for c in sorted({as_code(v) for v in values}, key=int)]
    else:
        order = []
    return {"table": table, "entries": entries, "unmatched": unmatched,
            "unlabelled": unlabelled, "image_column": image_col, "id_matching": use_ids,
            "label_columns": plan["columns"], "label_form": form, "multi_label": multi,
            "code_names": names, "patient_column": patient_col, "split_column": split_col,
            "table_split": table_split, "class_order": order}


def read_label_table(root: Path, images: list[Path], description: str = "") -> dict | None:
    """The best label table (or the split tables merged) for ``images`` under ``root``, as
    {"tables", "entries": [(path, labels, group, split)], "multi_label", "classes", ...}; None
    when no table labels these images."""
    matcher = IdMatcher(images, root)
    candidates = [c for t in find_tables(root)
                  if (c := _read_one_table(t, matcher, len(images), description))]
    if not candidates:
        return None
    by_files = lambda c: (len({e[0] for e in c["entries"]}), -len(c["unmatched"]))  # noqa: E731
    best = max(candidates, key=by_files)
    chosen = [best]
    if best["table_split"]:  # train.csv + test.csv (+ val.csv): one dataset, split kept
        chosen = [c for c in candidates if c["table_split"] and
                  c["image_column"] == best["image_column"] and
                  c["label_form"] == best["label_form"]]
        chosen = [max((c for c in chosen if c["table_split"] == s), key=by_files)
                  for s in sorted({c["table_split"] for c in chosen})]
    return _merge(chosen)


def _merge(tables: list[dict]) -> dict:
    multi = any(t["multi_label"] for t in tables)
    by_path: dict[Path, tuple] = {}
    conflicts: dict[Path, str] = {}
    for table in tables:
        for path, labels, group, split in table["entries"]:
            labels = labels if multi else labels[:1]
            if path in by_path and sorted(by_path[path][1]) != sorted(labels):
                conflicts.setdefault(path, f"{path}: rows give different labels "
                                     f"({by_path[path][1]} and {labels}); left out")
            by_path.setdefault(path, (path, labels, group, split))
    for path in conflicts:
        by_path.pop(path, None)
    order = []
    for table in tables:
        order += [c for c in table["class_order"] if c not in order]
    first = tables[0]
    return {"tables": [str(t["table"]) for t in tables], "entries": list(by_path.values()),
            "sheet": tables[0].get("sheet"),
            "multi_label": multi, "class_order": order, "conflicts": list(conflicts.values()),
            "unmatched": [u for t in tables for u in t["unmatched"]],
            "unlabelled": [u for t in tables for u in t["unlabelled"]],
            **{k: first[k] for k in ("image_column", "id_matching", "label_columns",
                                     "label_form", "code_names", "patient_column",
                                     "split_column")}}


def label_counts(entries: list[tuple]) -> Counter:
    return Counter(label for entry in entries for label in entry[1])


# --------------------------------------------------------------------------- the ScanResult
def _dimension(paths: list[Path], fmt: str) -> str:
    if any(p.is_dir() for p in paths[:20]):
        return "3D"
    if fmt in ("nifti", "nrrd", "mha", "analyze"):
        return "3D"
    if fmt in ("npy", "pt", "pck", "pkl"):
        shape, _ = array_shape(paths[0])
        return dimension_of_shape(shape) if shape else ""
    return "2D"


def scan_label_table(root: Path, images: list[Path], description: str = "",
                     file_format: str | None = None):
    """A ``label_table`` ScanResult for ``images`` under ``root``, or None when no table under
    the folder labels them. ``file_format`` overrides the format read from the suffixes."""
    table = read_label_table(root, images, description)
    if table is None:
        return None
    return table_result(root, images, table, file_format)


def table_result(root: Path, images: list[Path], table: dict, file_format: str | None = None,
                 layout_details: dict | None = None):
    """The ``label_table`` ScanResult of a merged table (read_label_table's shape)."""
    mapping = held_out_splits([e[3] for e in table["entries"]])
    samples, sources = [], []
    for path, labels, group, split in table["entries"]:
        if group:
            sources.append(f"table column {table['patient_column']!r}")
        else:
            group, source = group_for(path, root)
            sources.append(source)
        samples.append(Sample(str(path), labels[0] if labels else "(none)", group,
                              mapping.get(split, split),
                              list(labels) if table["multi_label"] else None))
    counts = label_counts(table["entries"])
    classes = [c for c in table["class_order"] if c in counts] + \
        sorted(c for c in counts if c not in table["class_order"])
    listed = {str(s.image) for s in samples}  # strings: 100,000 Paths cost seconds
    names = ", ".join(Path(t).name for t in table["tables"])
    skipped = [f"{p}: not listed in {names}" for p in images
               if str(p) not in listed and os.path.dirname(p) not in listed][:1000]
    skipped += table["unmatched"][:1000] + table["unlabelled"][:1000] + table["conflicts"][:1000]
    if len(table["unmatched"]) > 1000:
        skipped.append(f"{len(table['unmatched'])} rows of {names} name no existing image")
    paths = [Path(s.image) for s in samples[:20]]  # _dimension looks at the first ones
    suffixes = Counter(suffix for s in samples  # a stat only for names without an image suffix
                       if (suffix := image_suffix(os.path.basename(str(s.image))))
                       in FORMAT_OF_SUFFIX or os.path.isfile(s.image))
    fmt = file_format if file_format is not None else (
        FORMAT_OF_SUFFIX.get(suffixes.most_common(1)[0][0], "") if suffixes else "slices")
    splits = {s.split for s in samples}
    details = {"table": table["tables"][0], **{k: table[k] for k in (
        "tables", "image_column", "label_columns", "label_form", "patient_column",
        "split_column", "multi_label", "code_names", "id_matching")},
        "label_column": table["label_columns"][0] if table["label_form"] != "one_hot" and
        table["label_form"] != "one_hot_multi" else None,
        "unmatched_rows": len(table["unmatched"]), "sheet": table.get("sheet"),
        **(layout_details or {})}
    return ScanResult(
        root=str(root), layout="label_table", task="diagnosis",
        dimension=_dimension(paths, fmt) or "2D", file_format=fmt, classes=classes,
        class_counts={c: counts[c] for c in classes}, samples=samples,
        group_source=group_source(sources),
        existing_split="test" in splits and bool(splits & {"train", "val"}) and "" not in splits,
        skipped=skipped, num_files=len(images), details=details)


def recognise_label_table(root: Path, top_dirs: list[Path], top_files: list[Path],
                          description: str):
    """Scan recogniser for a label table the table-and-pairs recogniser did not reach (one
    folder down, e.g. ``metadata/labels.xlsx`` beside ``scans/``)."""
    if not find_tables(root):
        return None
    return scan_label_table(root, all_images(root), description)
