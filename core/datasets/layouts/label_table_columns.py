"""Choosing a label table's columns: which column names the image files, how the labels are
held (one column, codes, one-hot 0/1 columns, several labels per cell), which column is the
patient key and which the split, and each row's labels.

May import: core.datasets.layouts.label_table_ids, core.datasets.layouts.tables,
core.datasets.layouts.types."""
from __future__ import annotations

import json
import re
from pathlib import Path

from core.datasets.layouts.label_table_ids import IdMatcher
from core.datasets.layouts.tables import (CODE, LABEL_NAME, NEGATIVES, SEPARATORS,
                                          described_column)
from core.datasets.layouts.types import SPLIT_VALUES

PATIENT_NAME = re.compile(r"patient|subject|participant|\bpid\b|case", re.I)
NOT_PATIENT_KEY = re.compile(r"age|sex|gender|weight|height|birth|position|name|size", re.I)
NOT_A_LABEL = re.compile(r"\b(?:sex|gender|age|view|position|laterality|side|modality|date|time|"
                         r"width|height|spacing|size|visit|format|type|manufacturer|"
                         r"follow)\b", re.I)
SPLIT_COLUMN = re.compile(r"^(?:split|set|subset|partition|fold|data[ _]?split|dataset)$", re.I)
TRUE_CELLS = {"1", "1.0", "true", "yes"}
BINARY_CELLS = TRUE_CELLS | {"0", "0.0", "-1", "-1.0", "", "false", "no"}
PROBE_ROWS = 3000        # rows used to choose columns
LABEL_WORDS = re.compile(r"\b(?:labels?|labell?ed|diagnos\w*|class(?:es)?|classif\w*|targets?|"
                         r"outcomes?|categor\w*|findings?|grades?)\b", re.I)
PATIENT_WORDS = re.compile(r"\b(?:patients?|subjects?|participants?|split by|group(?:ed)? by|"
                           r"grouping)\b", re.I)


def as_code(value: str) -> str:
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


def choose_image_column(columns: list[str], rows: list[dict], matcher: IdMatcher,
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


def plan_labels(columns: list[str], rows: list[dict], exclude: set[str], description: str,
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


def patient_column(columns: list[str], rows: list[dict], exclude: set[str],
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


def split_column(columns: list[str], rows: list[dict]) -> str | None:
    for column in columns:
        if SPLIT_COLUMN.match(column.strip()):
            values = [str(r.get(column, "")).strip().lower() for r in rows]
            mapped = [v for v in values if v in SPLIT_VALUES]
            if len(mapped) >= 0.9 * len(values) and {"train", "training"} & set(mapped):
                return column
    return None


def row_labels(row: dict, plan: dict, multi: bool, names: dict[str, str]) -> list[str] | None:
    """The row's labels ([] = a negative in multi-label data), or None when it has none."""
    if plan["form"] == "one_hot":
        labels = [c for c in plan["columns"] if str(row.get(c, "")).lower() in TRUE_CELLS]
        if multi:
            return [c for c in labels if c.lower() not in NEGATIVES]
        return labels if len(labels) == 1 else None
    cell = row.get(plan["columns"][0], "")
    raw = cell if isinstance(cell, list) else [v for v in SEPARATORS.split(cell) if v] if multi \
        else ([cell] if cell else [])
    raw = [names.get(as_code(v), as_code(v)) for v in raw]
    if multi:
        return [v for v in raw if v.lower() not in NEGATIVES]
    return raw[:1] or None
