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

Rows that name no file, and files no row names, are reported in ``skipped``.
"""
from __future__ import annotations

import csv
import json
import os
import re
from collections import Counter, defaultdict
from pathlib import Path

from core.datasets.layouts.common import group_for, group_source, held_out_splits, split_of_name
from core.datasets.layouts.array_headers import array_shape, dimension_of_shape
from core.datasets.layouts.types import (FORMAT_OF_SUFFIX, Sample, ScanResult, all_images,
                                         image_suffix)
from core.datasets.layouts.tables import CODE, LABEL_NAME, NEGATIVES, SEPARATORS, read_table, code_mapping, described_column, find_tables
from core.datasets.layouts.types import SPLIT_VALUES

PATIENT_NAME = re.compile(r"patient|subject|participant|\bpid\b|case", re.I)
NOT_PATIENT_KEY = re.compile(r"age|sex|gender|weight|height|birth|position|name|size", re.I)
NOT_A_LABEL = re.compile(r"\b(?:sex|gender|age|view|position|laterality|side|modality|date|time|"
                         r"width|height|spacing|size|visit|format|type|manufacturer|"
                         r"follow)\b", re.I)
SPLIT_COLUMN = re.compile(r"^(?:split|set|subset|partition|fold|data[ _]?split|dataset)$", re.I)
TRUE_CELLS = {"1", "1.0", "true", "yes"}
BINARY_CELLS = TRUE_CELLS | {"0", "0.0", "-1", "-1.0", "", "false", "no"}
TOKEN_SPLIT = re.compile(r"[_\-\s.]+")
MAX_CLASSES = 200
BOX_COLUMNS = [("x", "y", "w", "h"), ("x0", "y0", "x1", "y1"), ("xmin", "ymin", "xmax", "ymax")]
MAX_TOKENS = 6           # longest token run an ID may be (``ADNI_002_S_0295``)
PROBE_ROWS = 3000        # rows used to choose columns
LABEL_WORDS = re.compile(r"\b(?:labels?|labell?ed|diagnos\w*|class(?:es)?|classif\w*|targets?|"
                         r"outcomes?|categor\w*|findings?|grades?)\b", re.I)
PATIENT_WORDS = re.compile(r"\b(?:patients?|subjects?|participants?|split by|group(?:ed)? by|"
                           r"grouping)\b", re.I)












def _file_keys(images: list[Path], root: Path) -> dict[str, Path]:
    """Lower-cased relative path, file name and stem -> file (first file wins); used by the box
    and report tables."""
    keys: dict[str, Path] = {}
    for path in images:
        rel = path.relative_to(root).as_posix()
        stem = path.name.split(".")[0]
        for key in (rel, path.name, stem):
            keys.setdefault(key.lower(), path)
    return keys


# --------------------------------------------------------------------------- matching files
def _name_forms(name: str) -> set[str]:
    """A file name, without its suffix, and without everything after the first dot."""
    forms = {name, name.split(".")[0]}
    if name.endswith(".nii.gz"):
        forms.add(name[:-7])
    elif "." in name:
        forms.add(name.rsplit(".", 1)[0])
    return {f for f in forms if f}


def _tokens(text: str) -> tuple[str, ...]:
    return tuple(t for t in TOKEN_SPLIT.split(text) if t)


class IdMatcher:
    """Which image file(s) a table cell names.

    Exact forms are tried first: the relative path from the dataset folder or its longest
    unambiguous trailing part, the file name, the stem — or a folder of slices. Then, for IDs,
    a run of the file stem's tokens (``I12345`` -> ``ADNI_002_S_0295_I12345.pt``; ``case7`` ->
    ``case7_view1.png`` and ``case7_view2.png``). A name several files share is refused unless
    more of the path tells them apart.
    """

    def __init__(self, images: list[Path], root: Path):
        self.root = root
        self.images = images
        self._exact: dict[str, Path | None] = {}   # None: several files share the key
        self._dirs: dict[str, Path | None] = {}
        folders = set()
        prefix = os.path.join(str(root), "")  # string slicing: relative_to is slow at 100k files
        for path in images:
            text = str(path)
            rel = text[len(prefix):].replace(os.sep, "/") if text.startswith(prefix) else \
                path.relative_to(root).as_posix()
            parts = rel.lower().split("/")
            head_forms = _name_forms(parts[-1])
            for k in range(1, len(parts) + 1):
                head = "/".join(parts[-k:-1])
                for form in head_forms:
                    self._add(self._exact, f"{head}/{form}" if head else form, path)
            if len(parts) > 1:
                folders.add(path.parent)
        for folder in folders:
            parts = folder.relative_to(root).as_posix().lower().split("/")
            for k in range(1, len(parts) + 1):
                self._add(self._dirs, "/".join(parts[-k:]), folder)
        self._runs: dict[tuple[str, ...], list[Path]] | None = None

    @staticmethod
    def _add(table: dict, key: str, path: Path) -> None:
        if key in table and table[key] != path:
            table[key] = None
        else:
            table.setdefault(key, path)

    @staticmethod
    def _normal(value: str) -> str:
        text = value.strip().strip("'\"").replace("\\", "/").lower()
        text = re.sub(r"^(?:\./)+", "", text)
        return text.strip("/")

    def exact(self, value: object) -> Path | None:
        """The one file (or slice folder) the cell names by path, name or stem; else None."""
        if not isinstance(value, str) or not value or len(value) > 1000:
            return None
        quick = self._exact.get(value.lower(), False)  # most cells: a plain name or stem
        if quick is not False:
            return quick
        parts = [p for p in self._normal(value).split("/") if p and p != "."]
        for table in (self._exact, self._dirs):
            for k in range(len(parts), 0, -1):
                key = "/".join(parts[-k:])
                if key in table:
                    return table[key]   # None when ambiguous: a shorter part is too
        return None

    def _run_index(self) -> dict[tuple[str, ...], list[Path]]:
        if self._runs is None:
            runs: dict[tuple[str, ...], list[Path]] = defaultdict(list)
            for path in self.images:
                stem = path.name.lower()
                stem = stem[:-7] if stem.endswith(".nii.gz") else stem.rsplit(".", 1)[0]
                tokens = _tokens(stem)
                seen = set()
                for i in range(len(tokens)):
                    for j in range(i + 1, min(len(tokens), i + MAX_TOKENS) + 1):
                        if tokens[i:j] not in seen:
                            seen.add(tokens[i:j])
                            runs[tokens[i:j]].append(path)
            self._runs = dict(runs)
        return self._runs

    def by_id(self, value: object) -> list[Path]:
        """Files whose stem holds the cell as a whole run of tokens (an ID)."""
        if not isinstance(value, str):
            return []
        text = self._normal(value).rsplit("/", 1)[-1]
        tokens = _tokens(text)
        if not tokens or len(tokens) > MAX_TOKENS or (text.isdigit() and len(text) < 3):
            return []
        return self._run_index().get(tokens, [])

    def find(self, value: object, use_ids: bool) -> list[Path]:
        hit = self.exact(value)
        if hit is not None:
            return [hit]
        return self.by_id(value) if use_ids else []












# --------------------------------------------------------------------------- one table
def _code(value: str) -> str:
    return str(int(float(value))) if CODE.match(value) else value


def _distinct(rows: list[dict], column: str) -> set:
    return {json.dumps(r.get(column, "")) for r in rows}


def _is_binary(rows: list[dict], column: str) -> bool:
    values = {str(r.get(column, "")).lower() for r in rows}
    return values <= BINARY_CELLS and bool(values & TRUE_CELLS)


def _mentioned(description: str, rows: list[dict], column: str) -> int:
    """How many of the column's values the description names as words (class names)."""
    if not description:
        return 0
    values = {v for r in rows for v in ([r.get(column, "")] if isinstance(r.get(column, ""), str)
                                        else r.get(column, [])) if v and not CODE.match(v)}
    if len(values) > 50:
        return 0
    return sum(bool(re.search(r"(?<![\w])" + re.escape(v) + r"(?![\w])", description, re.I))
               for v in values)


def _label_like(rows: list[dict], column: str) -> bool:
    """Short words or integer codes, not URLs, paths, dates or measurements."""
    values = [v for r in rows for v in ([r.get(column, "")] if isinstance(r.get(column, ""), str)
                                        else r.get(column, [])) if v]
    return bool(values) and all(len(v) <= 40 and not re.search(r"[/\\]|://|^\d+[-:]\d+", v)
                                and (CODE.match(v) or not re.match(r"^-?[\d.]+$", v))
                                for v in values)


def _hits(values: list, matcher: IdMatcher, use_ids: bool) -> tuple[int, int]:
    files: set[Path] = set()
    rows = 0
    for value in values:
        found = matcher.find(value, use_ids)
        rows += bool(found)
        files.update(found)
    return rows, len(files)


def _choose_image_column(columns: list[str], rows: list[dict], matcher: IdMatcher,
                         num_images: int) -> tuple[str, bool] | None:
    """(column, use_ids): the column naming the most files — by path/name/stem if any column
    does, else by ID. Half the rows must name a file, or half the files must be named (a big
    table of which only some images were downloaded)."""
    probe = rows[:PROBE_ROWS]
    for use_ids in (False, True):
        scored = []
        for column in columns:
            values = [r.get(column, "") for r in probe]
            if use_ids and len({json.dumps(v) for v in values}) < 0.5 * len(values):
                continue  # IDs of images are (nearly) unique per row
            scored.append((*_hits(values, matcher, use_ids), column))
        if not scored:
            continue
        hit_rows, files, best = max(scored, key=lambda s: s[:2])
        if hit_rows >= 2 and (hit_rows >= 0.5 * len(probe) or files >= 0.5 * num_images):
            return best, use_ids
        if len(rows) > len(probe):  # inconclusive on the first rows: count over every row
            hit = [c for n, _, c in scored if n] or [c for _, _, c in scored]
            full = [(*_hits([r.get(c, "") for r in rows[:200_000]], matcher, use_ids), c)
                    for c in hit]
            hit_rows, files, best = max(full, key=lambda s: s[:2])
            if hit_rows >= 2 and files >= 0.5 * num_images:
                return best, use_ids
    return None


def _plan_labels(columns: list[str], rows: list[dict], exclude: set[str], description: str,
                 matcher: IdMatcher) -> dict | None:
    """How the labels are held: {"form": "column"|"one_hot", "columns": [...]}."""
    probe = rows[:PROBE_ROWS]
    candidates = [c for c in columns if c not in exclude]
    file_columns = {c for c in candidates
                    if sum(matcher.exact(r.get(c, "")) is not None for r in probe) >=
                    0.5 * len(probe)}
    candidates = [c for c in candidates if c not in file_columns]  # mask paths are not labels
    if not candidates:
        return None
    binary = [c for c in candidates if _is_binary(probe, c)]
    exactly_one = all(sum(str(r.get(c, "")).lower() in TRUE_CELLS for c in binary) == 1
                      for r in probe) if binary else False
    one_hot = len(binary) >= 3 or (len(binary) == 2 and exactly_one)
    described = described_column(description, candidates, LABEL_WORDS)
    if described and len(_distinct(probe, described)) > 1 and \
            not (one_hot and described in binary):  # naming one of the 0/1 columns
        return {"form": "column", "columns": [described]}
    if one_hot:
        return {"form": "one_hot", "columns": binary}
    named = [c for c in candidates if LABEL_NAME.search(c) and len(_distinct(probe, c)) > 1]
    # the column whose values the description names as classes, then a text label column
    # before a 0/1 flag
    named.sort(key=lambda c: (-_mentioned(description, probe, c), c in binary))
    if named:
        return {"form": "column", "columns": [named[0]]}
    if file_columns:
        return None  # image + mask paths: a segmentation table, not labels
    few = [c for c in candidates if 1 < len(_distinct(probe, c)) <= 50 and
           not NOT_A_LABEL.search(c) and _label_like(probe, c)]
    few.sort(key=lambda c: (-_mentioned(description, probe, c), len(_distinct(probe, c))))
    return {"form": "column", "columns": [few[0]]} if few else None


def _patient_column(columns: list[str], rows: list[dict], exclude: set[str],
                    description: str = "") -> str | None:
    """A column named like a patient key (``Patient ID``, ``Subject``); with a description,
    else the column it names next to "patient" / "subject" / "split by"."""
    probe = rows[:PROBE_ROWS]
    options = [c for c in columns if c not in exclude and len(_distinct(probe, c)) > 1]
    named = [c for c in options if PATIENT_NAME.search(c) and not NOT_PATIENT_KEY.search(c)]
    named.sort(key=lambda c: not re.search(r"id\b|key|no\b|number|code", c, re.I))
    if named:
        return named[0]
    return described_column(description, options, PATIENT_WORDS, window=40) if description \
        else None


def _split_column(columns: list[str], rows: list[dict]) -> str | None:
    for column in columns:
        if SPLIT_COLUMN.match(column.strip()):
            values = [str(r.get(column, "")).strip().lower() for r in rows]
            mapped = [v for v in values if v in SPLIT_VALUES]
            if len(mapped) >= 0.9 * len(values) and {"train", "training"} & set(mapped):
                return column
    return None


def _row_labels(row: dict, plan: dict, multi: bool, names: dict[str, str]) -> list[str] | None:
    """The row's labels ([] = a negative in multi-label data), or None when it has none."""
    if plan["form"] == "one_hot":
        labels = [c for c in plan["columns"] if str(row.get(c, "")).lower() in TRUE_CELLS]
        if multi:
            return [c for c in labels if c.lower() not in NEGATIVES]
        return labels if len(labels) == 1 else None
    cell = row.get(plan["columns"][0], "")
    raw = cell if isinstance(cell, list) else [v for v in SEPARATORS.split(cell) if v] if multi \
        else ([cell] if cell else [])
    raw = [names.get(_code(v), _code(v)) for v in raw]
    if multi:
        return [v for v in raw if v.lower() not in NEGATIVES]
    return raw[:1] or None


def _read_one_table(table: Path, matcher: IdMatcher, num_images: int,
                    description: str) -> dict | None:
    try:
        columns, rows = read_table(table)
    except (OSError, ValueError, csv.Error, UnicodeDecodeError, ImportError):
        return None
    if not rows or not columns:
        return None
    lower = {c.lower() for c in columns}
    if any(set(box) <= lower for box in BOX_COLUMNS) or "impression" in lower:
        return None  # a box table (detection) or a report table
    chosen = _choose_image_column(columns, rows, matcher, num_images)
    if chosen is None:
        return None
    image_col, use_ids = chosen
    split_col = _split_column([c for c in columns if c != image_col], rows)
    patient_col = _patient_column(columns, rows, {image_col, split_col})
    plan = _plan_labels(columns, rows, {image_col, split_col, patient_col}, description, matcher)
    if plan is None:
        return None
    if patient_col is None:  # only now: the description never turns the labels into patients
        patient_col = _patient_column(columns, rows, {image_col, split_col, *plan["columns"]},
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
    table_split = split_of_name(table.name)
    entries, unmatched, unlabelled = [], [], []
    for number, row in enumerate(rows, start=2):
        value = row.get(image_col, "")
        paths = matcher.find(value, use_ids)
        if not paths:
            unmatched.append(f"{table.name} row {number}: {str(value)[:80]!r} names no image file")
            continue
        labels = _row_labels(row, plan, multi, names)
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
        order = [names.get(c, c) for c in sorted({_code(v) for v in values}, key=int)]
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
    if fmt in ("nifti", "nrrd", "mha"):
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
        "unmatched_rows": len(table["unmatched"])}
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
