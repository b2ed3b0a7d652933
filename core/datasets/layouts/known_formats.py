"""Known public dataset formats as data: ``core/datasets/formats/*.json``, one file a format.

A format file says how a datacard description names the format (``words``, a regex), which
readings stand for it (``readings``: a reader name, a ``details`` value, a details value's
ending or part, or a layout), how to recognise it in a folder (``signature``: lists of shallow globs
under the folder, all of one list matching), the task it usually carries and where it is
documented. The generic machinery does the reading; a format is only a prior: the reading that
stands for a format the description names or the folder shows scores a little higher, and the
card says which format was recognised. Adding a format is adding a file.

May import: nothing of the project.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

FORMATS_DIR = Path(__file__).resolve().parent.parent / "formats"
MAX_GLOB_HITS = 1


@lru_cache(maxsize=1)
def load_formats() -> dict[str, dict]:
    """Every format file, by key (ValueError naming a broken file)."""
    out = {}
    for path in sorted(FORMATS_DIR.glob("*.json")):
        try:
            spec = json.loads(path.read_text())
            re.compile(spec.get("words") or "(?!)")
        except (ValueError, re.error) as exc:
            raise ValueError(f"format file {path.name} is broken: {exc}") from exc
        out[spec.get("key") or path.stem] = spec
    return out


def formats_named(text: str) -> set[str]:
    """The formats a description names."""
    low = (text or "").lower()
    return {k for k, f in load_formats().items()
            if f.get("words") and re.search(f["words"], low)}


def _stands_for(cond: dict, reader: str, details: dict, layout: str) -> bool:
    if "reader" in cond and cond["reader"] != reader:
        return False
    if "layout" in cond and cond["layout"] != layout:
        return False
    if any(details.get(k) != v for k, v in (cond.get("detail") or {}).items()):
        return False
    if any(not str(details.get(k, "")).endswith(v)
           for k, v in (cond.get("detail_endswith") or {}).items()):
        return False
    return all(v in str(details.get(k, "")) for k, v in (cond.get("detail_contains") or {}).items())


def formats_of_reading(reader: str, details: dict, layout: str) -> set[str]:
    """The formats a reading stands for (and the ones its condition names as ``also``)."""
    found = set()
    for key, spec in load_formats().items():
        for cond in spec.get("readings") or []:
            if _stands_for(cond, reader, details, layout):
                found |= {key, *cond.get("also", [])}
    return found


def _matches(root: Path, pattern: str) -> bool:
    try:
        return next(iter(root.glob(pattern)), None) is not None
    except (OSError, ValueError):
        return False


def recognised(root: Path) -> list[str]:
    """The formats whose signature the folder shows (shallow globs only: fast on any tree)."""
    return [key for key, spec in load_formats().items()
            if any(group and all(_matches(root, g) for g in group)
                   for group in spec.get("signature") or [])]


def describe(keys: list[str]) -> list[dict]:
    """Name and documentation of formats (what the card shows)."""
    formats = load_formats()
    return [{"key": k, "name": formats[k].get("name", k), "docs": formats[k].get("docs", "")}
            for k in keys if k in formats]
