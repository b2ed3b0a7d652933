"""Layout recogniser for DICOM datasets: one sample per DICOM series.

A folder whose images are DICOM files is grouped into series by ``SeriesInstanceUID`` from the
headers (core.datasets.dicom_series); each series of several slices (or one multi-frame file) is
one 3D sample, its patient (``PatientID``) the grouping key of the split. Labels come from

* a table at the top of the folder (CSV/TSV/XLSX) with a column of ``PatientID``,
  ``StudyInstanceUID``, ``SeriesInstanceUID`` values (or series folder names) and a label
  column (named like a label, named in the datacard description, or else the one with few
  distinct values; ``A|B`` cells are multi-label as in a label table of the records engine), or
* class folders above the series (``CLASS/.../series files``, optionally under ``train/`` and
  ``test/``, whose split is kept).

A sample's image is its series folder when that folder holds exactly that one series; when a
folder holds several series, the ordered files go into ``extra["series_files"]`` (with
``extra["series_instance_uid"]``) and the index names a ``<Datapath>/series/<uid>.series.json``
manifest instead (core.datasets.dicom_series.write_series_manifests).

Datasets of single-frame 2D DICOM files (one radiograph per patient) stay 2D samples, one file
each: when their files carry a DICOM suffix and no table joins by a DICOM identifier, this
recogniser leaves them to the simpler layouts (class folders, label tables by file name).
"""
from __future__ import annotations

import os
import re
from collections import Counter, defaultdict
from pathlib import Path

from core.datasets.dicom_series import DicomSeries, group_series, read_headers
from core.datasets.layouts import links
from core.datasets.layouts.tables import LABEL_NAME, NEGATIVES, SEPARATORS
from core.datasets.layouts.types import (SPLIT_NAMES, Sample, ScanError, ScanResult, group_of,
                                         image_suffix, is_image)
from core.imaging.refs import DICOM_SUFFIXES, is_dicom_file
from core.privacy.pseudonyms import pseudonym

TABLE_SUFFIXES = (".csv", ".tsv", ".xlsx", ".xls")
JOIN_KEYS = ("PatientID", "StudyInstanceUID", "SeriesInstanceUID", "folder")
ID_NAME = re.compile(r"patient|subject|study|series|uid|accession|\bid\b|_id$|^id", re.I)
MIN_MATCH_SHARE = 0.5  # a join column must name at least half of the series


def _dicom_files(root: Path, skipped: list[str]) -> tuple[list[Path], int] | None:
    """DICOM candidates under root and how many other image files sit beside them; None as
    soon as other images clearly dominate (not a DICOM dataset: leave it to other layouts).
    Files that are neither (notes, stray binaries) go to ``skipped``; top-level tables do not."""
    dicoms: list[Path] = []
    others = 0
    for folder, dirs, files in links.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            path = Path(folder) / name
            if name.startswith("."):
                continue
            if is_image(name) and image_suffix(name) not in DICOM_SUFFIXES:
                others += 1
                if others >= 20 and others > len(dicoms):
                    return None
            elif is_dicom_file(path):
                dicoms.append(path)
            elif not (Path(folder) == root and path.suffix.lower() in TABLE_SUFFIXES):
                skipped.append(f"{path}: not a DICOM file")
    if not dicoms or others > 0.1 * len(dicoms):
        return None
    return dicoms, others


def _read_table(path: Path):
    import pandas as pd
    try:
        if path.suffix.lower() in (".xlsx", ".xls"):
            return pd.read_excel(path, dtype=str).fillna("")
        return pd.read_csv(path, sep=None, engine="python", dtype=str, keep_default_na=False,
                           encoding="utf-8-sig")
    except Exception:  # unreadable or not a table: not a label source
        return None


def _key_values(series: DicomSeries, key: str, root: Path) -> set[str]:
    if key == "folder":
        folder = Path(series.folders[0]) if len(series.folders) == 1 else \
            Path(os.path.commonpath(series.folders))
        return {folder.name, folder.relative_to(root).as_posix()} if folder != root else set()
    value = {"PatientID": series.patient_id, "StudyInstanceUID": series.study_instance_uid,
             "SeriesInstanceUID": series.series_instance_uid}[key]
    return {value} if value else set()


def _label_column(table, exclude: set[str], description: str) -> str | None:
    """The column holding class labels: named in the description, else named like a label,
    else the one with few distinct values; free text (long cells, many values) never is."""
    columns = [c for c in table.columns if c not in exclude and not str(c).startswith("Unnamed")]
    cells = {c: table[c].astype(str).str.strip() for c in columns}
    tokens = {c: {t for v in cells[c] for t in SEPARATORS.split(v) if t} for c in columns}
    words = {c: cells[c].str.split().str.len().mean() for c in columns}
    usable = [c for c in columns if 1 < len(tokens[c]) <= 100 and words[c] <= 4]
    named_in_text = [c for c in usable if len(str(c)) > 2 and
                     re.search(rf"\b{re.escape(str(c))}\b", description or "", re.I)]
    named = [c for c in usable if LABEL_NAME.search(str(c))]
    few = sorted((c for c in usable if cells[c].nunique() <= 50 and not ID_NAME.search(str(c))),
                 key=lambda c: cells[c].nunique())
    for group in (named_in_text, named, few):
        if group:
            return group[0]
    return None


def _labels_of(cell: str, multi: bool) -> list[str]:
    raw = [v for v in SEPARATORS.split(str(cell).strip()) if v]
    return [v for v in raw if v.lower() not in NEGATIVES] if multi else raw[:1]


def table_labels(root: Path, top_files: list[Path], series: list[DicomSeries],
                 description: str = "") -> dict | None:
    """The best label table at the top of root joined to the series: {"table", "join_column",
    "join_key", "label_column", "multi_label", "labels": {uid: [labels]}, "unmatched": [uid],
    "ambiguous": [uid]}, or None when no table names at least half the series."""
    best = None
    for path in sorted(p for p in top_files if p.suffix.lower() in TABLE_SUFFIXES):
        table = _read_table(path)
        if table is None or table.empty:
            continue
        for column in table.columns:
            values = set(table[column].astype(str).str.strip())
            for key in JOIN_KEYS:
                hits = sum(bool(_key_values(s, key, root) & values) for s in series)
                if hits and (best is None or hits > best[0]):
                    best = (hits, path, table, column, key)
    if best is None or best[0] < MIN_MATCH_SHARE * len(series):
        return None
    _, path, table, join_column, key = best
    id_columns = {join_column} | {
        c for c in table.columns if c != join_column and any(
            sum(bool(_key_values(s, k, root) & set(table[c].astype(str).str.strip()))
                for s in series) >= MIN_MATCH_SHARE * len(series) for k in JOIN_KEYS)}
    label_column = _label_column(table, id_columns, description)
    if label_column is None:
        return None
    cells = table[label_column].astype(str).str.strip()
    multi = bool(cells.map(lambda v: bool(SEPARATORS.search(v))).any())
    by_value: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    for value, cell in zip(table[join_column].astype(str).str.strip(), cells):
        if value:
            by_value[value].add(tuple(_labels_of(cell, multi)))
    labels, unmatched, ambiguous = {}, [], []
    for s in series:
        found = {lab for v in _key_values(s, key, root) for lab in by_value.get(v, set())}
        if not found:
            unmatched.append(s.series_instance_uid)
        elif len(found) > 1:
            ambiguous.append(s.series_instance_uid)
        else:
            labels[s.series_instance_uid] = list(found.pop())
    return {"table": str(path), "join_column": str(join_column), "join_key": key,
            "label_column": str(label_column), "multi_label": multi, "labels": labels,
            "unmatched": unmatched, "ambiguous": ambiguous}


def _split_and_parts(folder: Path, root: Path) -> tuple[str, tuple[str, ...]]:
    parts = folder.relative_to(root).parts if folder != root else ()
    if parts and parts[0].lower() in SPLIT_NAMES:
        return SPLIT_NAMES[parts[0].lower()], parts[1:]
    return "", parts


def folder_labels(root: Path, series: list[DicomSeries],
                  series_per_folder: Counter) -> dict[str, tuple[str, str]]:
    """{uid: (label, split)} from class folders above the series: the first folder below root
    (or below train/ test/) is the class, unless that folder is itself the folder of a single
    series (then the series sit directly in root and there are no classes)."""
    out = {}
    for s in series:
        folder = _series_folder(s)
        split, parts = _split_and_parts(folder, root)
        if len(parts) >= 2 or (len(parts) == 1 and series_per_folder[str(folder)] > 1):
            out[s.series_instance_uid] = (parts[0], split)
    return out


def _series_folder(s: DicomSeries) -> Path:
    return Path(s.folders[0]) if len(s.folders) == 1 else Path(os.path.commonpath(s.folders))


def _table_joins_file_names(root: Path, top_files: list[Path], files: list[Path]) -> bool:
    """Whether a top-level table names the DICOM files themselves (a simpler label-table
    layout already handles that)."""
    names = {k.lower() for p in files for k in (p.name, p.name.split(".")[0],
                                                p.relative_to(root).as_posix())}
    for path in (p for p in top_files if p.suffix.lower() in TABLE_SUFFIXES):
        table = _read_table(path)
        if table is None or table.empty:
            continue
        for column in table.columns:
            values = table[column].astype(str).str.strip().str.lower()
            if values.isin(names).mean() >= 0.8:
                return True
    return False


def _looks_like_2d_files(files: list[Path]) -> bool:
    """A quick look (at most 10 files in each of 20 folders) before reading every header: in a
    series dataset files of one series sit together; one radiograph per file never shares."""
    by_folder: dict[Path, list[Path]] = defaultdict(list)
    for path in files:
        by_folder[path.parent].append(path)
    folders = sorted(by_folder)
    picked = folders[::max(1, len(folders) // 20)][:20]
    records = [r for _, r in read_headers([f for d in picked for f in by_folder[d][:10]], [])]
    uids = [r["uid"] for r in records]
    return bool(records) and len(set(uids)) == len(uids) and all(r["frames"] == 1
                                                                 for r in records)


def recognise_dicom_series(root: Path, top_dirs: list[Path], top_files: list[Path],
                           description: str) -> ScanResult | None:
    """A ScanResult with one sample per DICOM series (see the module docstring), or None when
    the folder's images are not DICOM or a simpler layout fits."""
    skipped: list[str] = []
    listed = _dicom_files(root, skipped)
    if listed is None:
        return None
    files, others = listed
    tables = [p for p in top_files if p.suffix.lower() in TABLE_SUFFIXES]
    if all(image_suffix(p.name) in DICOM_SUFFIXES for p in files) and \
            (not tables or _table_joins_file_names(root, top_files, files)) and \
            _looks_like_2d_files(files):
        return None  # one 2D .dcm per image: class folders / label tables handle it
    headers = read_headers(files, skipped)
    if not headers:
        return None
    series = group_series(headers, skipped)
    if not series:
        return None
    volumes = [s for s in series if s.is_volume]
    if volumes:
        skipped.extend(f"series {s.series_instance_uid} ({s.files[0]}): a single slice in a "
                       "dataset of volumes (a localizer or key image)"
                       for s in series if not s.is_volume)
        series, dimension = volumes, "3D"
        table = table_labels(root, top_files, series, description)
    else:
        dimension = "2D"
        table = table_labels(root, top_files, series, description)
        suffixed = all(image_suffix(Path(s.files[0]).name) in DICOM_SUFFIXES for s in series)
        if suffixed and (table is None or _table_joins_file_names(
                root, top_files, [Path(s.files[0]) for s in series])):
            return None  # one 2D file per image: class folders / label tables handle it

    # which folders hold exactly one series and nothing else DICOM
    candidates_per_folder = Counter(str(p.parent) for p in files)
    series_per_folder = Counter(f for s in series for f in s.folders)
    by_folder = folder_labels(root, series, series_per_folder) if table is None else {}
    if table is None and len({label for label, _ in by_folder.values()}) < 2:
        if others or any(p.suffix.lower() in TABLE_SUFFIXES + (".json", ".jsonl")
                         for p in top_files):
            return None  # masks, reports or another table beside the series: other layouts
        raise ScanError(
            f"found {len(series)} DICOM series under {root} but no labels for them: put a "
            "table (CSV/TSV/XLSX) at the top of the folder with a PatientID, StudyInstanceUID "
            "or SeriesInstanceUID column and a label column, or put each class's series in a "
            "folder named after the class")
    samples: list[Sample] = []
    for s in series:
        uid = s.series_instance_uid
        if table is not None:
            if uid not in table["labels"]:
                why = "has rows with different labels" if uid in table["ambiguous"] else \
                    "is not in the table"
                skipped.append(f"series {uid} ({_series_folder(s)}): its "
                               f"{table['join_key']} {why} {Path(table['table']).name}")
                continue
            labels = table["labels"][uid]
            if not labels and not table["multi_label"]:
                skipped.append(f"series {uid} ({_series_folder(s)}): empty "
                               f"{table['label_column']!r} in {Path(table['table']).name}")
                continue
            split = _split_and_parts(_series_folder(s), root)[0]
            stratum = labels[0] if labels else "(none)"
        else:
            if uid not in by_folder:
                skipped.append(f"series {uid} ({_series_folder(s)}): not inside a class folder")
                continue
            stratum, split = by_folder[uid]
            labels = None
        folder = _series_folder(s)
        extra = {"series_instance_uid": uid, "patient_id": pseudonym(s.patient_id),
                 "study_instance_uid": s.study_instance_uid, "modality": s.modality,
                 "num_slices": s.num_slices}
        if dimension == "2D" or len(s.files) == 1:
            image = s.files[0]
        elif len(s.folders) == 1 and candidates_per_folder[s.folders[0]] == len(s.files):
            image = s.folders[0]
        else:
            image = str(folder)
            extra["series_files"] = list(s.files)
        group = pseudonym(s.patient_id) or s.study_instance_uid or group_of(folder)[0]
        samples.append(Sample(image, stratum, group, split,
                              labels if table is not None and table["multi_label"] else None,
                              extra))
    if not samples:
        raise ScanError(f"none of the {len(series)} DICOM series under {root} got a label; "
                        f"e.g. {skipped[-1] if skipped else ''}")
    counts = Counter(lbl for s in samples for lbl in s.label_list()) if \
        table is not None and table["multi_label"] else Counter(s.label for s in samples)
    classes = sorted(counts)
    details = {"label_source": "table" if table is not None else "class folders",
               "num_series": len(series), "num_dicom_files": len(files),
               "other_image_files": others,
               "modalities": dict(Counter(s.modality for s in series)),
               "series_sharing_a_folder": sum("series_files" in s.extra for s in samples),
               "ordered_by": dict(Counter(s.ordered_by for s in series))}
    if table is not None:
        details.update({k: table[k] for k in ("table", "join_column", "join_key",
                                               "label_column", "multi_label")})
    with_patient = sum(bool(s.extra["patient_id"]) for s in samples)
    return ScanResult(
        root=str(root), layout="dicom_series", task="diagnosis", dimension=dimension,
        file_format="dicom", classes=classes, class_counts={c: counts[c] for c in classes},
        samples=samples,
        group_source="DICOM PatientID" if with_patient >= len(samples) / 2 else
        "DICOM StudyInstanceUID / folder name",
        existing_split=any(s.split == "test" for s in samples), skipped=skipped[:1000],
        num_files=len(files) + others, details=details)
