"""Reading label tables in whichever format the clinic keeps them (CSV, TSV, XLSX, JSON,
JSONL), bounded in size, and what a datacard description says about them (label codes, which
column holds what). Shared by the records engine (core.datasets.records) and the array, box,
DICOM and report layouts.

May import: core.datasets.layouts.types."""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from core.datasets.layouts.types import SPLIT_VALUES

TABLE_SUFFIXES = (".csv", ".tsv", ".xlsx", ".json", ".jsonl")

MAX_TABLE_BYTES = 500_000_000

LABEL_NAME = re.compile(r"label|finding|diagnos|class|group|target|category|outcome", re.I)

NEGATIVES = {"no finding", "no findings", "no_finding", "nofinding", "none", "normal",
             "negative"}

SEPARATORS = re.compile(r"\s*[|;,]\s*")

CODE = re.compile(r"^-?\d+(?:\.0+)?$")


# --------------------------------------------------------------------------- reading tables
def _cell(value: object) -> str | list[str]:
    """A table cell as text ("" for empty / NaN; integral floats without ".0"); JSON lists stay
    lists (several labels)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        if value != value:  # NaN
            return ""
        return str(int(value)) if value.is_integer() else str(value)
    if isinstance(value, (list, tuple)):
        return [str(_cell(v)) for v in value if str(_cell(v))]
    return str(value).strip()


def _records(rows: list[dict], extra: dict | None = None) -> tuple[list[str], list[dict]]:
    columns: list[str] = []
    out = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        record = {str(k): _cell(v) for k, v in row.items() if not isinstance(v, dict)}
        record.update(extra or {})
        for key in record:
            if key not in columns:
                columns.append(key)
        out.append(record)
    return columns, out


def _read_json(path: Path, lines: bool) -> tuple[list[str], list[dict]]:
    text = path.read_text(encoding="utf-8-sig")
    if lines:
        return _records([json.loads(line) for line in text.splitlines() if line.strip()])
    data = json.loads(text)
    if isinstance(data, list):
        return _records(data)
    if not isinstance(data, dict) or not data:
        return [], []
    if all(str(k).lower() in SPLIT_VALUES for k in data) and \
            all(isinstance(v, list) for v in data.values()):  # {"train": [..], "test": [..]}
        columns, rows = [], []
        for key, items in data.items():
            cols, recs = _records(items, {"split": SPLIT_VALUES[str(key).lower()]})
            columns += [c for c in cols if c not in columns]
            rows += recs
        return columns, rows
    if all(isinstance(v, dict) for v in data.values()):   # {image: {label: .., patient: ..}}
        return _records([{"image": k, **v} for k, v in data.items()])
    if all(isinstance(v, (str, int, float, list)) for v in data.values()):  # {image: label}
        return _records([{"image": k, "label": v} for k, v in data.items()])
    return [], []


def _delimiter(path: Path, header: str) -> str:
    if path.suffix.lower() == ".tsv":
        return "\t"
    counts = {d: header.count(d) for d in (",", "\t", ";")}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else ","


def read_table(path: Path) -> tuple[list[str], list[dict]]:
    """(columns, rows) of a CSV/TSV/XLSX/JSON/JSONL table; every cell is text (or a list of
    texts for a JSON list). Raises OSError/ValueError for an unreadable table."""
    suffix = path.suffix.lower()
    if path.stat().st_size > MAX_TABLE_BYTES:
        raise ValueError(f"{path.name} is larger than {MAX_TABLE_BYTES // 1_000_000} MB")
    if suffix in (".json", ".jsonl"):
        return _read_json(path, suffix == ".jsonl")
    if suffix in (".xlsx", ".xlsm"):
        return read_sheets(path)[0][1:]
    with open(path, newline="", encoding="utf-8-sig") as handle:
        header = handle.readline()
        handle.seek(0)
        reader = csv.DictReader(handle, delimiter=_delimiter(path, header))
        columns = [str(c).strip() for c in reader.fieldnames or []]
        rows = [{c: (v or "").strip() if isinstance(v, str) else "" for c, v in
                 zip(columns, row.values())} for row in reader]
        return columns, rows


def read_sheets(path: Path) -> list[tuple[str | None, list[str], list[dict]]]:
    """(sheet name, columns, rows) for every sheet of a workbook (a notes sheet first is common),
    or the one table of any other format (sheet name None)."""
    if path.suffix.lower() not in (".xlsx", ".xlsm"):
        return [(None, *read_table(path))]
    if path.stat().st_size > MAX_TABLE_BYTES:
        raise ValueError(f"{path.name} is larger than {MAX_TABLE_BYTES // 1_000_000} MB")
    import zipfile

    import pandas as pd
    try:
        frames = pd.read_excel(path, sheet_name=None, dtype=object, header=None)
    except (zipfile.BadZipFile, KeyError, EOFError, TypeError, ValueError) as exc:
        # openpyxl's errors for a file that is not a workbook (truncated, renamed, broken)
        raise ValueError(f"{path.name} is not a readable Excel workbook ({exc})") from exc
    except Exception as exc:   # noqa: BLE001 - any parser failure on untrusted bytes
        raise ValueError(f"{path.name} could not be read as a workbook "
                         f"({type(exc).__name__}: {exc})") from exc
    out = []
    for name, frame in frames.items():
        frame = frame.dropna(how="all").dropna(axis=1, how="all")
        if frame.empty:
            out.append((str(name), [], []))
            continue
        # the header is the first of the top rows that fills the most cells (a title row or
        # two above the table is common in clinical workbooks)
        filled = frame.head(20).notna().sum(axis=1)
        header_at = filled.index[list(filled).index(filled.max())]
        body = frame.loc[header_at:].iloc[1:]
        body.columns = [str(c).strip() if c == c and c is not None else f"column_{i}"
                        for i, c in enumerate(frame.loc[header_at])]
        out.append((str(name), *_records(body.to_dict(orient="records"))))
    return out or [(None, [], [])]


# --------------------------------------------------------------------------- the description
_CONNECTOR = r"['\"]?\s*(?:=>|->|→|=|:|–|—|-|\(|\bfor\b|\bis\b|\bmeans\b)\s*['\"]?"

_CODE_HEAD = re.compile(r"(?<![\w.])['\"]?(?P<code>-?\d+)(?![\w.])" + _CONNECTOR, re.I)

# a list in brackets with no sign between code and name: "(0 normal, 1 TB)", "(1 necrotic core,
# 2 edema and 4 enhancing tumour)", "labels: 0 normal, 1 tumour", "label 0 normal, 1 tumour"
_CODE_LISTED = re.compile(r"(?:(?<=\()|(?<=,\s)|(?<=;\s)|(?<=\band\s)|(?<=\bor\s)|(?<=:\s)|"
                          r"(?<=\blabel\s)|(?<=\blabels\s)|(?<=\bclass\s)|(?<=\bcoded\s))"
                          r"(?P<code>-?\d+)\s+(?=[A-Za-z])(?!(?:for|is|means|as|to|of|in)\b)",
                          re.I)

_NAME_FIRST = re.compile(r"(?P<name>[A-Za-z][\w /'-]{0,40}?)\s*(?:\(\s*|=\s*)(?P<code>-?\d+)"
                         r"\s*\)?(?![\w.])", re.I)

# a name ends at punctuation, or at "and"/"or" that starts the next code ("0 = normal or benign,
# 1 = malignant" keeps "normal or benign"; "0 for healthy and 1 for torn" splits)
_NAME_END = re.compile(r"[,;:=()\[\]{}\n'\"]|\s+(?:and|or)(?:\s+(?=['\"]?-?\d)|$)|\.(?:\s|$)",
                       re.I)


def _clean_name(text: str) -> str:
    """The class name at the start of ``text``: up to a comma, bracket, "and", full stop."""
    name = _NAME_END.split(text.strip(), maxsplit=1)[0].strip()
    name = re.sub(r"^(?:(?:and|or)\s+)?(?:(?:an?|the)\s+)?", "", name, flags=re.I)
    name = name.strip(" .-")
    return name if re.match(r"[A-Za-z]", name) else ""


def _code_items(description: str) -> list[list[tuple[int, int, str, str]]]:
    """(start, end, code, name) items, in the two ways text gives them: code first
    ("0 = healthy", "0 for a healthy knee") and name first ("healthy (0)")."""
    heads = sorted([*_CODE_HEAD.finditer(description), *_CODE_LISTED.finditer(description)],
                   key=lambda m: m.start())
    code_first = []
    for i, head in enumerate(heads):
        stop = heads[i + 1].start() if i + 1 < len(heads) else len(description)
        name = _clean_name(description[head.end():stop])
        if name:
            code_first.append((head.start(), head.end() + len(name), str(int(head["code"])),
                               name))
    name_first = [(m.start(), m.end(), str(int(m["code"])), _clean_name(m["name"]))
                  for m in _NAME_FIRST.finditer(description)]
    return [code_first, [item for item in name_first if item[3]]]


def code_mapping(description: str, codes: list[str]) -> dict[str, str]:
    """Names of integer codes the description gives ("aclDiagnosis: 0 = healthy, 1 = partial
    tear", "coded 0 for a healthy ligament, 1 for ...", "0: normal, 1: pneumonia",
    "healthy (0), torn (1)"), or {} unless every code gets a distinct name."""
    wanted = {str(int(float(c))) for c in codes if CODE.match(str(c))}
    if not description or not wanted:
        return {}
    for items in _code_items(description):
        clusters: list[list] = []
        for item in items:  # items close together form one mapping
            if clusters and item[0] - clusters[-1][-1][1] <= 80:
                clusters[-1].append(item)
            else:
                clusters.append([item])
        for cluster in clusters:
            mapping: dict[str, str] = {}
            for _, _, code, name in cluster:
                mapping.setdefault(code, name)
            if wanted <= set(mapping) and \
                    len({mapping[c].lower() for c in wanted}) == len(wanted):
                return {c: mapping[c] for c in sorted(wanted, key=int)}
    return {}


def described_column(description: str, columns: list[str], words: re.Pattern,
                     window: int = 60) -> str | None:
    """The column the description names closest to one of ``words`` ("its 'Group' column gives
    the diagnosis", "label column: Group"), or None."""
    best, best_distance = None, window + 1
    for column in columns:
        if len(column) < 3 and not re.search(r"['\"`]" + re.escape(column) + r"['\"`]",
                                             description):
            continue
        pattern = r"(?<![\w])" + re.escape(column) + r"(?![\w])"
        for match in re.finditer(pattern, description, re.I):
            if words.search(column):
                distance = 0
            else:
                before = description[max(0, match.start() - window): match.start()]
                after = description[match.end(): match.end() + window]
                gaps = [len(before) - w.end() for w in words.finditer(before)] + \
                    [w.start() for w in words.finditer(after)]
                distance = min(gaps, default=window + 1)
            if distance < best_distance:
                best, best_distance = column, distance
    return best


# the findings a description may name as the one thing marked (boxes, a binary mask)
FINDINGS = [("nodule", r"nodules?"), ("lesion", r"lesions?"), ("tumour", r"tumou?rs?"),
            ("mass", r"mass(?:es)?(?!\s+index)"), ("polyp", r"polyps?"), ("cyst", r"cysts?"),
            ("metastasis", r"metastas[ie]s"), ("fracture", r"fractures?"),
            ("aneurysm", r"aneurysms?"), ("haemorrhage", r"ha?emorrhages?"),
            ("calcification", r"calcifications?"), ("opacity", r"opacit(?:y|ies)"),
            ("mitosis", r"mitos[ie]s"), ("effusion", r"effusions?"),
            ("nucleus", r"nucle(?:us|i)"), ("vessel", r"vessels?"), ("infarct", r"infarcts?"),
            ("pneumothorax", r"pneumothora(?:x|ces)"),
            ("foreign object", r"foreign (?:objects?|bod(?:y|ies))")]


def described_finding(description: str) -> str:
    """The one finding the description names for the boxes or a binary mask ('nodule' for
    "Lung nodule CT scans"), or "" when it names none or several."""
    text = description or ""
    named = {name for name, pattern in FINDINGS if re.search(rf"\b(?:{pattern})\b", text, re.I)}
    return named.pop() if len(named) == 1 else ""
