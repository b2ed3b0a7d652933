"""Tables of run-length encoded masks (CSV/TSV, the Kaggle ``EncodedPixels`` family): which
column holds the runs, which names the image, which (if any) the class, and each image's rows.

* the **runs column**: every non-empty cell (``-1``, empty and ``nan`` are "no finding") is
  pairs of whole numbers, and the header says so (``EncodedPixels``, ``rle``, ``encoding``,
  ``segmentation``, ``mask``) or the cells are long (six numbers or more in a fifth of them);
* the **image column**: the column whose values name the most image files (a file name, a path,
  a stem such as a DICOM SOPInstanceUID or ``case123_slice_0001``, ``core.datasets.layouts.
  drawn_masks`` matches them); an id ending in ``_<class>`` (``0002cc93b.jpg_1``) names the
  image and the class;
* the **class column**: a column named like one (``class``, ``ClassId``, ``label``,
  ``category``) or one that takes another value on another row of the same image (the long
  format: one row per class per image); none means one foreground class;
* ``height``/``width`` columns, when present, must agree with the image.

Headers are stripped (``ImageId, EncodedPixels`` has a space). Rows are numbered as a text
editor numbers the file's lines (the header is line 1), so messages name the line to fix.
Several rows of one image and class are one mask (their union).

May import: core.datasets.layouts.run_length, .types (ScanError).
"""
from __future__ import annotations

import csv
import io
import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from core.datasets.layouts.run_length import RunLengthError, is_empty, parse_runs
from core.datasets.layouts.types import ScanError

MAX_TABLE_BYTES = 1_000_000_000
MAX_TABLES = 40
PROBE_ROWS = 500
PROBE_BYTES = 1_000_000    # a table is read in full only when its start holds runs
RUNS_HEADER = re.compile(r"rle|encod|pixels|segmentation|mask|run.?length|annotation", re.I)
CLASS_HEADER = re.compile(r"^(?:class(?:.?(?:id|name))?|labels?(?:.?(?:id|name))?|"
                          r"category(?:.?(?:id|name))?|structure|classes)$", re.I)
HEIGHT_HEADER = re.compile(r"^(?:img.?|image.?)?(?:height|rows)$", re.I)
WIDTH_HEADER = re.compile(r"^(?:img.?|image.?)?(?:width|cols|columns)$", re.I)
MAX_CLASSES = 32


@dataclass
class RleTable:
    file: Path
    id_column: str
    runs_column: str
    class_column: str = ""            # "" when the id carries it or there is one class
    class_in_id: bool = False         # ids are "<image>_<class>"
    shape_columns: tuple = ()         # (height column, width column) when the table has them
    images: dict = field(default_factory=dict)   # image -> {class: [line, ...]}
    runs: dict = field(default_factory=dict)     # line -> parsed pairs
    unmatched: list = field(default_factory=list)  # ids that name no image file
    empty_lines: int = 0              # "no finding" rows

    def columns(self) -> dict:
        """What the index needs to read the table again (see ``table_rows``)."""
        return {"id_column": self.id_column, "runs_column": self.runs_column,
                "class_column": self.class_column, "class_in_id": self.class_in_id,
                "shape_columns": list(self.shape_columns)}


def read_rows(path: Path, head: int = 0) -> tuple[list[str], list[list[str]]]:
    """(stripped header, rows) of a CSV/TSV (only its first ``head`` bytes' whole lines when
    given); the delimiter is sniffed from the header line."""
    if head:
        with open(path, "rb") as handle:
            data = handle.read(head)
        text = data.decode("utf-8-sig", errors="replace")
        text = text[:text.rfind("\n") + 1] if len(data) == head and "\n" in text else text
    else:
        text = Path(path).read_text(encoding="utf-8-sig", errors="replace")
    first = text.split("\n", 1)[0]
    delimiter = max([",", "\t", ";", "|"], key=first.count)
    rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))
    if not rows:
        return [], []
    return [h.strip() for h in rows[0]], rows[1:]


def _cell(row: list[str], index: int) -> str:
    return row[index].strip() if index < len(row) else ""


def runs_column(header: list[str], rows: list[list[str]]) -> int | None:
    """The index of the column of run-length cells (see the module doc), or None."""
    best = None
    for index, name in enumerate(header):
        cells = [_cell(r, index) for r in rows[:PROBE_ROWS]]
        filled = [c for c in cells if not is_empty(c)]
        if len(filled) < 2:
            continue
        parsed = 0
        long_cells = 0
        for cell in filled:
            try:
                pairs = parse_runs(cell)
            except RunLengthError:
                continue
            parsed += 1
            long_cells += len(pairs) >= 3
        named = bool(RUNS_HEADER.search(name))   # a bad cell there is an error, not a no
        if parsed < (0.5 if named else 0.9) * len(filled):
            continue
        if named or long_cells >= 0.2 * len(filled):
            if best is None or RUNS_HEADER.search(name):
                best = index
    return best


def _shape_columns(header: list[str]) -> tuple:
    heights = [h for h in header if HEIGHT_HEADER.match(h)]
    widths = [h for h in header if WIDTH_HEADER.match(h)]
    return (heights[0], widths[0]) if heights and widths else ()


def read_rle_table(path: Path, find) -> RleTable | None:
    """The table's runs by image and class, or None when it holds no run-length masks. ``find``
    maps an id cell to an image file (or None). Raises ScanError naming the line of a cell that
    is not run-length pairs, or when no id names an image file."""
    try:
        if os.path.getsize(path) > MAX_TABLE_BYTES:
            return None
        header, rows = read_rows(path, PROBE_BYTES)
        runs_at = runs_column(header, rows)
        if runs_at is None or len(header) < 2:
            return None
        header, rows = read_rows(path)
    except (OSError, csv.Error, UnicodeError):
        return None
    ids = _id_column(header, rows, runs_at, find)
    if ids is None:
        sample = [_cell(r, 0 if runs_at else 1) for r in rows[:3]]
        raise ScanError(f"{path.name} holds run-length encoded masks (column "
                        f"{header[runs_at]!r}) but none of its ids (e.g. {', '.join(sample)}) "
                        "names an image file in the folder. Name each image in that table by "
                        "its file name, path or stem")
    id_at, class_in_id = ids
    table = RleTable(path, header[id_at], header[runs_at], class_in_id=class_in_id,
                     shape_columns=_shape_columns(header))
    class_at = None if class_in_id else _class_column(header, rows, runs_at, id_at)
    if class_at is not None:
        table.class_column = header[class_at]
    seen_ids = set()
    for line, row in enumerate(rows, start=2):
        if not any(c.strip() for c in row):
            continue
        key, cls = _key_and_class(_cell(row, id_at), class_in_id)
        if class_at is not None:
            cls = _cell(row, class_at)
        try:
            pairs = parse_runs(_cell(row, runs_at))
        except RunLengthError as exc:
            raise ScanError(f"{path.name} line {line} ({table.id_column} {key!r}): the "
                            f"{table.runs_column} cell is not run-length pairs ({exc}). Write "
                            "'start length start length ...', or -1 / leave it empty for no "
                            "finding") from None
        image = find(key)
        if image is None:
            if key not in seen_ids:
                table.unmatched.append(key)
            seen_ids.add(key)
            continue
        seen_ids.add(key)
        classes = table.images.setdefault(image, {})
        if len(pairs):
            classes.setdefault(cls, []).append(line)
            table.runs[line] = pairs
        else:
            table.empty_lines += 1
    return table if table.images else None


def _key_and_class(cell: str, class_in_id: bool) -> tuple[str, str]:
    if class_in_id:
        key, _, cls = cell.rpartition("_")
        return key, cls
    return cell, ""


def _id_column(header, rows, runs_at, find) -> tuple[int, bool] | None:
    """(index, whether ids end in _<class>) of the column naming the most image files."""
    best, best_hits = None, 0
    probe = rows[:PROBE_ROWS]
    for index in range(len(header)):
        if index == runs_at:
            continue
        values = list(dict.fromkeys(_cell(r, index) for r in probe if _cell(r, index)))
        if not values:
            continue
        for class_in_id in (False, True):
            keys = [_key_and_class(v, class_in_id) for v in values]
            if class_in_id and (len({c for _, c in keys}) > MAX_CLASSES or
                                any(not k for k, _ in keys)):
                continue
            hits = sum(find(k) is not None for k, _ in dict.fromkeys(keys))
            if hits > best_hits and hits >= max(2, 0.3 * len({k for k, _ in keys})):
                best, best_hits = (index, class_in_id), hits
            if hits:
                break   # the plain id names images: no class suffix
    return best


def _class_column(header, rows, runs_at, id_at) -> int | None:
    """A column named like a class with few values, or one that varies within an image."""
    best = None
    for index, name in enumerate(header):
        if index in (runs_at, id_at) or HEIGHT_HEADER.match(name) or WIDTH_HEADER.match(name):
            continue
        values = Counter(_cell(r, index) for r in rows if _cell(r, index))
        if not values or len(values) > MAX_CLASSES or len(values) >= max(2, len(rows) // 2):
            continue
        per_image = defaultdict(set)
        for row in rows[:20000]:
            per_image[_cell(row, id_at)].add(_cell(row, index))
        varies = any(len(v) > 1 for v in per_image.values())
        if CLASS_HEADER.match(name) or varies:
            if best is None or CLASS_HEADER.match(name):
                best = index
    return best


def _whole(text: str) -> str:
    try:
        return str(int(float(text)))
    except ValueError:
        return text


@lru_cache(maxsize=4)
def _lines_cached(path: str, columns: tuple, stamp: tuple) -> dict[int, tuple[str, str, str]]:
    header, rows = read_rows(Path(path))
    id_column, runs_column, class_column, class_in_id, *shape = columns
    try:
        id_at, runs_at = header.index(id_column), header.index(runs_column)
        class_at = header.index(class_column) if class_column else None
        shape_at = [header.index(c) for c in shape[0]] if shape and shape[0] else []
    except ValueError:
        raise RunLengthError(f"{path}: the columns {id_column!r} and {runs_column!r} are no "
                             "longer in its header; register the dataset again") from None
    out = {}
    for line, row in enumerate(rows, start=2):
        key, cls = _key_and_class(_cell(row, id_at), class_in_id)
        if class_at is not None:
            cls = _cell(row, class_at)
        size = "x".join(_whole(_cell(row, i)) for i in shape_at)
        out[line] = (cls, _cell(row, runs_at), size)
    return out


def table_rows(path: str | os.PathLike, columns: dict, lines: list[int]
               ) -> list[tuple[int, str, np.ndarray, str]]:
    """(line, class, pairs, "height x width" or "") of the given lines of a run-length table,
    read once while the file is unchanged (the index draws every case from one read).
    Raises RunLengthError naming the line of a cell that cannot be read."""
    st = os.stat(path)
    key = (columns["id_column"], columns["runs_column"], columns.get("class_column", ""),
           bool(columns.get("class_in_id")), tuple(columns.get("shape_columns") or ()))
    found = _lines_cached(str(path), key, (st.st_size, st.st_mtime_ns))
    out = []
    for line in lines:
        if line not in found:
            raise RunLengthError(f"{Path(path).name} has no line {line} any more; register "
                                 "the dataset again")
        cls, cell, size = found[line]
        try:
            out.append((line, cls, parse_runs(cell), size))
        except RunLengthError as exc:
            raise RunLengthError(f"{Path(path).name} line {line}: {exc}") from None
    return out
