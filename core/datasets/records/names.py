"""File names as a record source: a label some datasets keep in a part of each image's name.

Montgomery's ``MCUCXR_0027_1.png`` ends in its reading (0 normal, 1 tuberculosis); other sets
put a grade or a class word in a fixed part of the name. A part of the names becomes a field
(``name part -1`` is the last ``_``/``-`` separated part of the stem) only when the datacard
description says what its values mean — codes the description names ("the last digit is the
reading (0 normal, 1 TB)") or the words themselves, in a sentence that calls them a label — so that follow-up numbers, slice indices, views
and ids are never read as labels by themselves. A part of the image's folder name that is one
of the two outcomes of a binary reading (MURA's ``study1_positive`` / ``study2_negative``) is a
field without a description: those words say what they are.

May import: core.datasets.layouts (tables, types), core.datasets.records.sources.
"""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from core.datasets.layouts.tables import code_mapping
from core.datasets.layouts.types import image_suffix
from core.datasets.records.fields import POLARITY
from core.datasets.records.sources import Source

SOURCE_NAME = "file names"
NAME_WORD = re.compile(r"\b(?:file ?names?|names? of the files?|digit|suffix|prefix|ends? (?:in|with)"
                       r"|named)\b", re.I)
MAX_VALUES = 10


def _parts(path: Path) -> list[str]:
    stem = path.name[: -len(image_suffix(path.name))] if image_suffix(path.name) else path.stem
    return [p for p in re.split(r"[_\-\s]+", stem) if p]


def _folder_part(path: Path, position: int) -> str:
    """A ``_``/``-`` separated part of the image's folder's name, when it has several."""
    parts = [p for p in re.split(r"[_\-\s]+", path.parent.name) if p]
    return parts[position] if len(parts) >= 2 else ""


LABEL_WORD = re.compile(r"\b(?:label\w*|class\w*|diagnos\w*|reading|finding\w*|grade\w*|"
                        r"categor\w*|outcome|result|target)\b", re.I)


def _described(values: list[str], description: str) -> bool:
    """One sentence of the description speaks of the file names as a label and says what the
    values are: codes it names ("the last digit of the file name is the reading (0 normal,
    1 TB)") or the words themselves."""
    for sentence in re.split(r"(?<=[.;!?])\s+|\n", description):
        if not (NAME_WORD.search(sentence) and LABEL_WORD.search(sentence)):
            continue
        if all(v.isdigit() for v in values):
            if code_mapping(sentence, values):
                return True
            continue
        words = {w.lower() for w in re.findall(r"[A-Za-z]+", sentence)}
        if all(v.isalpha() for v in values) and all(v.lower() in words for v in values):
            return True
    return False


def name_sources(root: Path, images: list[Path], description: str) -> list[Source]:
    """The file-name source (one record per image) when a part of the names is described as a
    label, or a folder name part is a binary outcome; [] otherwise."""
    if len(images) < 4:
        return []
    parts = [_parts(p) for p in images]
    fields: dict[str, list[str]] = {}
    for position in (-1, -2, 0):
        column = [p[position] if len(p) >= (abs(position) if position < 0 else 1) + 1 else ""
                  for p in parts]
        counts = Counter(c for c in column if c)
        if sum(counts.values()) < 0.9 * len(images) or not 2 <= len(counts) <= MAX_VALUES:
            continue
        if min(counts.values()) < 2 or not _described(sorted(counts), description):
            continue
        if sum(c.lower() == p.parent.name.lower() for c, p in zip(column, images)) >= \
                0.9 * len(images):
            continue   # the name repeats its class folder: the folders are the reading
        fields[f"name part {position}"] = column
    for position in (-1, 0):   # a study folder named for its reading: study1_positive
        column = [_folder_part(p, position) for p in images]
        counts = Counter(c.lower() for c in column if c)
        if sum(counts.values()) >= 0.9 * len(images) and min(counts.values(), default=0) >= 2 \
                and any(set(counts) == set(pair) for pair in POLARITY):
            fields[f"folder name part {position}"] = [c.lower() for c in column]
    if not fields:
        return []
    records = [{"__file__": p.relative_to(root).as_posix(),
                **{name: column[i] for name, column in fields.items()}}
               for i, p in enumerate(images)]
    return [Source(SOURCE_NAME, root, "names", records)]
