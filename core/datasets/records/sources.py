"""Record sources: every structured file of a dataset folder read as *records with fields*.

A source is a list of records (dicts of field -> text, or a list of texts) with a name that
says where it came from. Read here:

* tables: CSV/TSV with any delimiter (sniffed), a BOM, or no header row (columns then named
  ``column_1`` ...); every sheet of a workbook;
* JSON: an array of records; ``{id: record}`` and ``{id: value}`` maps (the key becomes the
  ``__key__`` field); ``{"train": [...], "test": [...]}`` (the key becomes ``__split__``); one
  list of records under a wrapper key (``{"data": [...]}``); COCO-like documents whose lists
  reference each other by id (``images`` / ``annotations`` / ``categories``), joined: one record
  per image with its annotations as a list of records and category ids replaced by names;
* JSON Lines, YAML (as JSON), XML (the most repeated element with children: one record each);
* per-file texts: a folder of ``.txt``/``.md`` files, one record per file (``__file__`` its
  stem, ``text`` its content and the report sections it holds: ``findings``, ``impression``);
* list files: ``.txt`` files whose lines are file names or paths (``train_list.txt``): one
  record per line (``__item__``), with the split the file's name gives.

Files named for a split (``train.csv`` / ``valid.csv``) with the same columns are merged into
one source, their split kept in ``__split__``. Nothing here decides what a field means
(core.datasets.records.fields) or which file it names (core.datasets.records.targets).

May import: core.datasets.layouts (tables, common, types, inventory).
"""
from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from core.datasets.layouts.common import split_of_name
from core.datasets.layouts.inventory import Inventory
from core.datasets.layouts.tables import _cell, read_sheets
from core.datasets.records.cell_values import boxes_in_cells, shapes_in_cells
from core.datasets.records.fields import ORIGIN

MAX_SOURCE_BYTES = 200_000_000
MAX_TEXT_BYTES = 200_000          # a per-file report or list is small
MAX_SOURCES = 60
MAX_TEXT_FILES = 50_000
SECTION = re.compile(r"^\s*(findings?|impressions?|conclusions?|indications?|comparisons?|"
                     r"history|technique|clinical (?:history|information))\s*:\s*",
                     re.I | re.M)


@dataclass
class Source:
    name: str                       # relative file (and sheet / part) it came from
    path: Path
    kind: str                       # table | json | jsonl | yaml | xml | texts | list
    records: list[dict] = field(default_factory=list)

    @property
    def fields(self) -> list[str]:
        seen: dict[str, None] = {}
        for record in self.records[:5000]:
            for key in record:
                if key != ORIGIN:   # where the record was read, not one of its fields
                    seen.setdefault(key, None)
        return list(seen)


def _flat(value, prefix: str = "", out: dict | None = None, depth: int = 0) -> dict:
    """A record's fields: nested dicts flattened to ``a.b`` (two levels), lists of records kept
    as lists of flattened dicts, scalars as text (core.datasets.layouts.tables._cell)."""
    out = {} if out is None else out
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, dict) and depth < 2:
            _flat(item, name + ".", out, depth + 1)
        elif isinstance(item, list) and item and all(isinstance(i, dict) for i in item):
            out[name] = [_flat(i, depth=depth + 1) for i in item[:10_000]]
        elif isinstance(item, list) and any(isinstance(i, list) for i in item):
            out[name] = item   # nested numbers: a polygon, a box list
        else:
            out[name] = _cell(item)
    return out


# --------------------------------------------------------------------------- tables
def _sniff(text: str, suffix: str) -> str:
    if suffix == ".tsv":
        return "\t"
    head = "\n".join(text.splitlines()[:20])
    try:
        return csv.Sniffer().sniff(head, delimiters=",;\t|").delimiter
    except csv.Error:
        counts = {d: head.count(d) for d in (",", "\t", ";", "|")}
        best = max(counts, key=counts.get)
        return best if counts[best] else ","


def _id_shape(cell: str) -> str | None:
    """``ROCO_00012`` -> ``A_9``: the shape of a cell holding digits (None without digits)."""
    cell = cell.strip()
    if not re.search(r"\d", cell):
        return None
    return re.sub(r"[A-Za-z]+", "A", re.sub(r"\d+", "9", cell))


def _looks_like_header(row: list[str], body: list[list[str]]) -> bool:
    """A first row is a header unless it looks like the rows below it: numbers where they have
    numbers, file names where they have file names, an id of the body's shape (``ROCO_00001``)
    where they have ids, or a value that recurs in its column below (a header never does)."""
    if not body:
        return True
    def shape(cell: str) -> str:
        cell = cell.strip()
        if re.fullmatch(r"-?\d+(?:\.\d+)?", cell):
            return "number"
        if re.search(r"\.[a-z0-9]{2,4}(?:\.gz)?$", cell, re.I) or "/" in cell:
            return "file"
        return "word" if cell else "empty"
    first = [shape(c) for c in row]
    second = [shape(c) for c in body[0]]
    if len(first) == len(second) and first == second and \
            any(s in ("number", "file") for s in first):
        return False
    sample = body[:200]
    for i, cell in enumerate(row):
        column = [r[i].strip() for r in sample if i < len(r) and r[i].strip()]
        if not column or not cell.strip():
            continue
        ids = _id_shape(cell)
        if ids and sum(_id_shape(c) == ids for c in column) >= 0.8 * len(column):
            return False
        if len(column) >= 5 and column.count(cell.strip()) >= 2:
            return False
    return True


def read_delimited(path: Path) -> list[dict]:
    raw = path.read_bytes()
    text = raw.decode("utf-8-sig", errors="replace")
    rows = list(csv.reader(io.StringIO(text), delimiter=_sniff(text, path.suffix.lower())))
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        return []
    if _looks_like_header(rows[0], rows[1:]):
        header = [c.strip() or f"column_{i + 1}" for i, c in enumerate(rows[0])]
        body = rows[1:]
    else:
        header = [f"column_{i + 1}" for i in range(max(len(r) for r in rows))]
        body = rows
    return [{h: (r[i].strip() if i < len(r) else "") for i, h in enumerate(header)}
            for r in body]


# --------------------------------------------------------------------------- JSON family
def _singular(name: str) -> str:
    name = name.lower()
    return name[:-3] + "y" if name.endswith("ies") else name[:-1] if name.endswith("s") else name


def _join_lists(data: dict) -> list[dict] | None:
    """COCO-like: lists of records that reference each other by ``<list>_id`` -> ``id``.
    The list the others point at and that points at none is the entity (images); lists whose
    records carry a name are lookups (categories); the rest (annotations) are attached to their
    entity record as a list, lookups resolved to names."""
    lists = {k: v for k, v in data.items() if isinstance(v, list) and v and
             all(isinstance(i, dict) for i in v[:50])}
    if len(lists) < 2:
        return None
    ids = {k: {str(r.get("id")): r for r in v if "id" in r} for k, v in lists.items()}
    refs = {k: {other for other in lists if other != k and
                any(f"{_singular(other)}_id" in r for r in v[:50])} for k, v in lists.items()}
    pointed = {o for targets in refs.values() for o in targets}
    entities = [k for k in lists if k in pointed and not refs[k] and not
                all("name" in r for r in lists[k][:50])]
    if len(entities) != 1:
        return None
    entity = entities[0]
    key = f"{_singular(entity)}_id"
    attached: dict[str, list[dict]] = {}
    for name, items in lists.items():
        if entity not in refs[name]:
            continue
        for item in items:
            row = dict(item)
            for other in refs[name] - {entity}:
                ref = f"{_singular(other)}_id"
                target = ids[other].get(str(row.get(ref)))
                if target is not None:
                    row[_singular(other)] = target.get("name", target.get("id"))
            attached.setdefault(str(row.get(key)), []).append(_flat(row))
    records = []
    for item in lists[entity]:
        record = _flat({k: v for k, v in item.items()})
        record["__annotations__"] = attached.get(str(item.get("id")), [])
        records.append(record)
    return records


def records_of_json(data) -> list[dict]:
    """The records a parsed JSON/YAML document holds (see the module docstring)."""
    if isinstance(data, list):
        return [_flat(r) for r in data if isinstance(r, dict)]
    if not isinstance(data, dict) or not data:
        return []
    joined = _join_lists(data)
    if joined is not None:
        return joined
    splits = {k: split_of_name(str(k)) for k in data}
    if all(splits.values()) and all(isinstance(v, list) for v in data.values()):
        out = []
        for key, items in data.items():
            for item in items:
                record = _flat(item) if isinstance(item, dict) else {"__item__": _cell(item)}
                out.append({**record, "__split__": splits[key]})
        return out
    record_lists = {k: v for k, v in data.items() if isinstance(v, list) and v and
                    all(isinstance(i, dict) for i in v[:50])}
    if len(record_lists) == 1 and len(next(iter(record_lists.values()))) >= 2:
        name, items = next(iter(record_lists.items()))
        split = split_of_name(str(name))
        return [{**_flat(i), **({"__split__": split} if split else {})}
                for i in items if isinstance(i, dict)]
    values = list(data.values())
    if len(values) >= 2 and all(isinstance(v, dict) for v in values):
        return [{"__key__": str(k), **_flat(v)} for k, v in data.items()]
    if len(values) >= 2 and all(isinstance(v, (str, int, float, list)) and
                                not (isinstance(v, list) and any(isinstance(i, dict) for i in v))
                                for v in values):
        return [{"__key__": str(k), "value": _cell(v)} for k, v in data.items()]
    return []


def _read_xml(path: Path) -> list[dict]:
    from collections import Counter

    import defusedxml.ElementTree as ET
    root = ET.parse(str(path)).getroot()
    counts = Counter(el.tag for el in root.iter() if len(el))
    counts.pop(root.tag, None)
    if not counts:
        return []
    tag, n = counts.most_common(1)[0]
    if n < 2:
        return []
    out = []
    for el in root.iter(tag):
        record = {f"@{k}": v for k, v in el.attrib.items()}
        for child in el:
            if len(child) == 0:
                record.setdefault(child.tag, (child.text or "").strip())
        out.append(record)
    return out


# --------------------------------------------------------------------------- texts and lists
def _sections(text: str) -> dict[str, str]:
    found = {}
    marks = list(SECTION.finditer(text))
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        word = mark.group(1).lower()
        key = "findings" if word.startswith("finding") else \
            "impression" if word.startswith(("impression", "conclusion")) else None
        if key:
            found[key] = " ".join(text[mark.end():end].split())
    return found


FILE_LINE = re.compile(r"^[\w.\-/\\ ]+\.(?:png|jpe?g|bmp|tiff?|dcm|nii(?:\.gz)?|nrrd|mha|mhd|"
                       r"npy|npz)$|^[\w\-./]+$", re.I)


def _is_list(lines: list[str]) -> bool:
    """One file name, path or id per line (no spaces inside, several lines)."""
    lines = [ln.strip() for ln in lines if ln.strip()]
    return len(lines) >= 2 and all(FILE_LINE.match(ln) and " " not in ln for ln in lines[:200])


NUMBER_ROW = re.compile(r"^[\s\d.,;eE+\-]*$")


def _is_prose(text: str) -> bool:
    """A report or caption has words; rows of numbers (YOLO boxes, landmarks) are not text."""
    return bool(re.search(r"[A-Za-z]{2,}", text)) and not all(
        NUMBER_ROW.match(ln) for ln in text.splitlines())


def text_sources(root: Path, files: list[Path]) -> list[Source]:
    """Per-file texts as one source per folder, and list files, from ``files``."""
    out, per_folder = [], {}
    for path in files[:MAX_TEXT_FILES]:
        try:
            if path.stat().st_size > MAX_TEXT_BYTES:
                continue
            text = path.read_text(encoding="utf-8-sig", errors="replace")
        except OSError:
            continue
        lines = text.splitlines()
        rel = path.relative_to(root).as_posix()
        filled = [ln for ln in lines if ln.strip()]
        if len(filled) >= 3 and sum("\t" in ln for ln in filled) >= 0.8 * len(filled):
            records = read_delimited(path)   # a tab-separated table kept as .txt (captions)
            if records:
                split = split_of_name(path.name)
                out.append(Source(rel, path, "table", [
                    {**r, **({"__split__": split} if split else {})} for r in records]))
                continue
        if _is_list(lines):
            split = split_of_name(path.name)
            out.append(Source(rel, path, "list", [
                {"__item__": ln.strip(), **({"__split__": split} if split else {})}
                for ln in lines if ln.strip()]))
            continue
        if not _is_prose(text):
            continue
        per_folder.setdefault(path.parent, []).append(
            {"__file__": path.stem, "text": " ".join(text.split()), **_sections(text)})
    for folder, records in per_folder.items():
        if len(records) >= 3:
            rel = folder.relative_to(root).as_posix() if folder != root else "."
            out.append(Source(f"{rel}/*.txt", folder, "texts", records))
    return out


# --------------------------------------------------------------------------- all sources
def _read_file(root: Path, path: Path) -> list[Source]:
    rel = path.relative_to(root).as_posix()
    suffix = path.suffix.lower()
    if path.stat().st_size > MAX_SOURCE_BYTES:
        return []
    if suffix in (".xlsx", ".xlsm", ".xls"):
        out = []
        for sheet, _cols, rows in read_sheets(path):
            if rows:
                out.append(Source(f"{rel}#{sheet}" if sheet else rel, path, "table",
                                  _located(shapes_in_cells(boxes_in_cells(rows)), path)))
        return out
    if suffix in (".csv", ".tsv"):
        return [Source(rel, path, "table",
                       _located(shapes_in_cells(boxes_in_cells(read_delimited(path))), path))]
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    if suffix == ".jsonl":
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        return [Source(rel, path, "jsonl", [_flat(r) for r in rows if isinstance(r, dict)])]
    if suffix == ".json":
        return [Source(rel, path, "json", records_of_json(json.loads(text)))]
    if suffix in (".yaml", ".yml"):
        import yaml
        return [Source(rel, path, "yaml", records_of_json(yaml.safe_load(text)))]
    if suffix == ".xml":
        return [Source(rel, path, "xml", _read_xml(path))]
    return []


def _located(rows: list[dict], path: Path) -> list[dict]:
    """Each row with the folder of its table (``__dir__``): a name several folders hold is the
    one beside the table (records.fields leaves it out of the fields)."""
    folder = str(path.parent)
    for row in rows:
        row[ORIGIN] = folder
    return rows


def _split_key(name: str) -> tuple[str, str] | None:
    """(the source's path with each part that names a split replaced by ``*``, the split the
    innermost one names) when a part of the path (the file's stem or a folder: ``valid.csv``,
    ``data/test/radiology/captions.txt``, RFMiD's ``Training_Set/Training_Set/
    RFMiD_Training_Labels.csv``) names a split; None otherwise."""
    path, _, sheet = name.partition("#")
    parts = list(Path(path).parts)
    split = ""
    for i in range(len(parts) - 1, -1, -1):
        named = split_of_name(parts[i])
        if named:
            split = split or named
            parts[i] = "*" + (Path(parts[i]).suffix if i == len(parts) - 1 else "")
    if not split:
        return None
    return "/".join(parts) + (f"#{sheet}" if sheet else ""), split


def _merge_splits(sources: list[Source]) -> list[Source]:
    """Sources that differ only by a split in their path, with the same fields: one source, the
    split of each record kept (``train.csv`` + ``valid.csv``; ``train/captions.txt`` +
    ``test/captions.txt``)."""
    groups: dict[tuple, list[tuple[Source, str]]] = {}
    rest = []
    for s in sources:
        found = _split_key(s.name)
        if found and s.kind in ("table", "json", "jsonl") and s.records:
            fields = tuple(sorted(f for f in s.fields if f != "__split__"))
            groups.setdefault((found[0], s.kind, fields), []).append((s, found[1]))
        else:
            rest.append(s)
    for members in groups.values():
        records = []
        for s, split in members:
            records += [{**r, "__split__": r.get("__split__") or split} for r in s.records]
        name = " + ".join(s.name for s, _ in members)
        rest.append(Source(name, members[0][0].path, members[0][0].kind, records))
    return rest


def find_sources(root: Path, inv: Inventory, exclude: frozenset | set = frozenset()
                 ) -> tuple[list[Source], list[str]]:
    """(sources, problems): every record source under ``root`` (but the files in ``exclude``:
    per-image sidecars, core.datasets.records.sidecars), and the files that could not be read
    (named, with why)."""
    sources, problems = [], []
    structured = sorted((p for p in inv.files("table", "annotation") if p not in exclude),
                        key=lambda p: (len(p.relative_to(root).parts), str(p)))
    per_file_json = len([p for p in structured if p.suffix.lower() == ".json"]) > MAX_SOURCES
    for path in structured:
        if per_file_json and path.suffix.lower() == ".json":
            continue   # one JSON per image (labelme, per-image annotations): not tables
        if len(sources) >= MAX_SOURCES:
            problems.append(f"more than {MAX_SOURCES} annotation files; the rest were not read")
            break
        try:
            sources += _read_file(root, path)
        except Exception as exc:  # noqa: BLE001 - any parser failure on untrusted bytes
            problems.append(f"{path.relative_to(root).as_posix()}: could not be read "
                            f"({type(exc).__name__}: {str(exc)[:120]})")
    sources += text_sources(root, inv.files("text"))
    return [s for s in _merge_splits(sources) if s.records], problems
