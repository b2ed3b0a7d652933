"""The patient key a split groups by, from every source a scan has, and how sure it is.

``infer_patient_keys(scan)`` is pure and idempotent: the scan with each sample's ``group``,
``group_source`` and ``details["patient_key"]`` (what split.json, the index summary and the
model card report) filled in.

* A key the layout read wins: a table column, DICOM PatientID, a patient folder, a report key.
  Samples a name-based layout key (``filename prefix``, ``case folder``) missed are inferred.
* A patient prefix in the file name (``person1_``, ``sub-03_``, ``patient0012_``: GROUP_RE).
* Else a guess, the coarsest plausible of: a folder level between the root and the file (split,
  class and generic folders skipped), then the file name up to its 1st, 2nd, ... number (split
  on ``_ - . space`` and letter/digit boundaries, leading class words dropped:
  ``NORMAL2-IM-1427-0001`` -> ``IM-1427``). Plausible: it covers most images, several share
  keys, 80% of the groups hold at most 20 images, there are more groups than classes, and a
  group's names differ after the key only in a trailing counter or in words that recur across
  patients (views, sides, series); a part unique to one group (``0045`` in ``2019_0045_a``) is
  an identifier the key must include, and a year or date is no patient.
* A guessed key recurring across the dataset's train/test folders, or across classes, for half
  the smaller side is numbering restarted per folder: kept apart per folder, with a warning.
* Else every image is its own group, with a warning when names still suggest repeated patients.

May import: core.datasets.layouts.types, core.datasets.layouts.common.
"""
from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import lru_cache

from core.datasets.layouts.common import GENERIC_DIRS, SPLITS
from core.datasets.layouts.types import (GROUP_RE, IMAGE_SUFFIXES, SPLIT_NAMES, Sample,
                                         ScanResult, group_of, image_suffix)

REPORT = "patient_key"              # the key of the report in ScanResult.details
NONE = "none (one group per image)"
MAX_GROUP = 20                      # images of one patient in a plausible group
PLAUSIBLE_SHARE = 0.8               # share of the groups that must hold at most MAX_GROUP
MAX_NUMBERS = 4                     # name keys tried: up to the 1st .. 4th number
MAX_FOLDER_LEVELS = 4
NAME_BASED = ("filename prefix", "case folder")       # layout keys that may leave gaps
STAND_INS = ("filename prefix before the label", "DICOM StudyInstanceUID")  # kept, but guesses
ORDINALS = ("1st", "2nd", "3rd", "4th")
CHUNK = re.compile(r"[A-Za-z0-9]+")
RUN = re.compile(r"[A-Za-z]+|[0-9]+")
DATE = re.compile(r"(?:19|20)\d\d(?:(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01]))?")
_MANY = object()
_SHAPE = str.maketrans("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
                       "0" * 10 + "a" * 52)


@lru_cache(maxsize=4096)
def _spans(shape: str) -> tuple[tuple[int, int, bool, bool], ...]:
    out = []
    for chunk in CHUNK.finditer(shape):
        runs = list(RUN.finditer(chunk.group()))
        if len(runs) > 3:
            out.append((chunk.start(), chunk.end(), True, True))
            continue
        for run in runs:
            out.append((chunk.start() + run.start(), chunk.start() + run.end(),
                        run.group()[0] == "0", len(runs) == 1))
    return tuple(out)


def tokens(stem: str) -> list[tuple[str, int, int, bool, bool]]:
    """A name's tokens, (text, start, end, identifier-like, a whole part): split on anything but
    letters and digits, then at letter/digit boundaries (``person1`` -> person, 1); a part that
    alternates more often (a hash or UUID part) stays one identifier-like token. Names that
    differ only in their letters and digits share the work (``IM-0119-0001``, ``IM-0120-0002``)."""
    return [(stem[a:b], a, b, ident, whole)
            for a, b, ident, whole in _spans(stem.translate(_SHAPE))]


@dataclass
class _Name:
    stem: str
    toks: list
    start: int                 # the first token after leading class / split words
    folders: list[str]         # folders between the root and the file that may be patients
    ids: list[int] = field(default_factory=list)  # identifier-like tokens from ``start`` on


@dataclass
class _Found:
    keys: list                 # per sample of the subset: a key, or None (its own group)
    source: str
    guess: bool
    rule: str
    example: str
    shown: str                 # the example as a warning quotes it: 'IM-0119-…'
    warnings: list[str] = field(default_factory=list)


def _first_path(sample: Sample) -> str:
    return str(sample.image[0] if isinstance(sample.image, list) and sample.image else
               sample.image)


def _own(sample: Sample) -> str:
    """The group of a sample without a patient key (splitting.sample_key)."""
    return json.dumps(sample.image) if isinstance(sample.image, list) else str(sample.image)


def _names(samples: list[Sample], root: str, labels: set[str]) -> list[_Name]:
    skip = {s.lower() for s in labels} | set(SPLITS) | set(SPLIT_NAMES) | GENERIC_DIRS
    words: dict[str, list[tuple]] = {}  # class and split words by their first token
    for word in sorted({tuple(t[0].lower() for t in tokens(w)) for w in
                        {*labels, *SPLITS, *SPLIT_NAMES}} - {()}, key=len, reverse=True):
        words.setdefault(word[0], []).append(word)
    prefix = os.path.join(root, "") if root else ""
    out = []
    for sample in samples:
        path = _first_path(sample)
        rel = path[len(prefix):] if prefix and path.startswith(prefix) else path
        parts = [p for p in rel.replace("\\", "/").split("/") if p not in ("", ".", "..")]
        name = parts[-1] if parts else ""
        suffix = image_suffix(name)
        stem = name[: -len(suffix)] if suffix in IMAGE_SUFFIXES else name
        toks = tokens(stem)
        start = _leading(toks, words) if toks and toks[0][0].lower() in words else 0
        out.append(_Name(stem, toks, start, [p for p in parts[:-1] if p.lower() not in skip],
                         [j for j in range(start, len(toks)) if toks[j][3]]))
    return out


def _leading(toks: list, words: dict[str, list[tuple]]) -> int:
    """How many leading tokens are class or split words (``NORMAL2`` counts its glued digits)."""
    i = 0
    for _ in range(2):
        for word in words.get(toks[i][0].lower(), []) if i < len(toks) else []:
            n = len(word)
            if i + n < len(toks) and tuple(t[0].lower() for t in toks[i:i + n]) == word:
                i += n
                if toks[i][3] and toks[i][1] == toks[i - 1][2] and toks[i - 1][0].isalpha():
                    i += 1
                break
        else:
            break
    return i if i < len(toks) else 0


def _name_keys(names: list[_Name], m: int) -> tuple[list, list, int]:
    """Keys up to each name's m-th number, the tokens after them, and how many keys end in a
    year or date followed by another number. A bare key (nothing after it) only joins a key
    that other names continue."""
    keys, rests, dated = [], [], 0
    for nm in names:
        ids = nm.ids
        if len(ids) < m:
            keys.append(None)
            rests.append(())
            continue
        j = ids[m - 1]
        last = nm.toks[j]
        keys.append(nm.stem[nm.toks[nm.start][1]:last[2]])
        rests.append(tuple(t[0].lower() for t in nm.toks[j + 1:]))
        dated += bool(last[4] and DATE.fullmatch(last[0]) and len(ids) > m)
    continued = {k.lower() for k, r in zip(keys, rests) if k is not None and r}
    keys = [k if k is not None and (r or k.lower() in continued) else None
            for k, r in zip(keys, rests)]
    return keys, rests, dated


def _identifier_after(keys: list, rests: list) -> str:
    """A part after the key (not the trailing one) whose values mostly belong to one group
    each: an identifier, so the key is too short. Returns an example value, or ""."""
    owner: dict = {}
    files: Counter = Counter()
    for key, rest in zip(keys, rests):
        if key is None:
            continue
        for slot in enumerate(rest[:-1]):
            files[slot] += 1
            if owner.setdefault(slot, key) != key:
                owner[slot] = _MANY
    positions: dict[int, list] = {}
    for (p, value), count in sorted(files.items()):
        entry = positions.setdefault(p, [0, 0, 0, ""])  # values, files, shared files, example
        shared = owner[(p, value)] is _MANY
        entry[:3] = entry[0] + 1, entry[1] + count, entry[2] + (count if shared else 0)
        entry[3] = entry[3] or ("" if shared else value)
    for values, total, shared, example in positions.values():
        if values >= 3 and shared * 2 < total:
            return example
    return ""


def _grade(keys: list, n_classes: int, rests: list | None = None,
           dated: int = 0) -> tuple[str, bool, dict]:
    """(why the keys are no patient key, "" when they are; whether they still suggest repeated
    patients; the grouping's numbers)."""
    sizes = Counter(k.lower() for k in keys if k is not None)
    keyed = sum(sizes.values())
    several = [c for c in sizes.values() if c > 1]
    groups = len(sizes) + len(keys) - keyed
    numbers = {"sharing": sum(several), "largest": max(sizes.values(), default=0)}
    if keyed * 2 < len(keys):
        return "it covers under half of the images", False, numbers
    if len(several) < 2:
        return "fewer than two keys are shared", False, numbers
    if groups < 3 or groups <= n_classes:
        return "it makes no more groups than there are classes", False, numbers
    if sum(c <= MAX_GROUP for c in sizes.values()) < PLAUSIBLE_SHARE * len(sizes):
        return f"groups too large for patients, up to {numbers['largest']}", True, numbers
    if dated * 2 >= keyed:
        return "it ends in a year or date", False, numbers
    lowered = [k.lower() if k is not None else None for k in keys]
    if rests is not None and (ident := _identifier_after(lowered, rests)):
        return f"the names go on with an identifier ('{ident}')", True, numbers
    return "", False, numbers


def _example(keys: list, stems: list[str] | None = None) -> tuple[str, str]:
    """A key that several samples share (the first in scan order), and how a warning shows it."""
    sizes = Counter(k.lower() for k in keys if k is not None)
    for i, key in enumerate(keys):
        if key is not None and sizes[key.lower()] > 1:
            if stems is None:
                return key, f"'{key}/…'"
            stem = stems[i]
            at = stem.find(key) + len(key)
            return key, f"'{key}{stem[at]}…'" if 0 < at < len(stem) else f"'{key}'"
    return "", ""


def _guess(names: list[_Name], n_classes: int) -> tuple[_Found | None, str]:
    """The coarsest plausible folder level, else name prefix, for samples without a key; else
    (None, a warning when the names still suggest repeated patients)."""
    hints: list[tuple[int, str]] = []
    depth = min(max((len(nm.folders) for nm in names), default=0), MAX_FOLDER_LEVELS)
    for level in range(depth):
        keys = ["/".join(nm.folders[:level + 1]) if len(nm.folders) > level else None
                for nm in names]
        why, suggests, numbers = _grade(keys, n_classes)
        example, shown = _example(keys)
        if not why:
            named = [nm.folders[level] for nm in names if len(nm.folders) > level]
            explicit = sum(bool(GROUP_RE.match(f)) for f in named) * 2 >= len(named)
            return _Found(keys, f"{'patient folder' if explicit else 'folder'} '{example}/'",
                          not explicit, f"folder level {level + 1} (split, class, generic "
                          "folders skipped)", example, shown), ""
        if suggests:
            hints.append((numbers["sharing"], f"folders ({shown}, {why})"))
    stems = [nm.stem for nm in names]
    for m in range(1, MAX_NUMBERS + 1):
        keys, rests, dated = _name_keys(names, m)
        if all(k is None for k in keys):
            break
        why, suggests, numbers = _grade(keys, n_classes, rests, dated)
        example, shown = _example(keys, stems)
        if not why:
            return _Found(keys, f"filename prefix '{example}'", True,
                          f"file name up to its {ORDINALS[m - 1]} number", example, shown), ""
        if suggests:
            hints.append((numbers["sharing"], f"file names ({shown}, {why})"))
    if not hints:
        return None, ""
    sharing, what = max(hints)
    return None, (f"no patient key found, but {sharing} images share {what}: if one patient "
                  "has several images, add a patient column; until then every image is its "
                  "own group and one patient's images may be on both sides")


def _scope(keys: list, parts: list[str], what: str, each: str) -> tuple[list, str]:
    """Keys kept apart per part (split or class) when at least half of the smaller part's keys
    recur in another part: numbering that restarts per folder, not shared patients."""
    by_part: dict[str, set] = {}
    for key, part in zip(keys, parts):
        if key is not None:
            by_part.setdefault(part, set()).add(key.lower())
    if len(by_part) < 2:
        return keys, ""
    seen = Counter(k for ks in by_part.values() for k in ks)
    recurring = {k for k, c in seen.items() if c > 1}
    smallest = min(by_part.values(), key=len)
    if len(recurring) < 2 or len(recurring & smallest) * 2 < len(smallest):
        return keys, ""
    note = (f"the guessed key repeats across {what} ({len(recurring)} keys, e.g. "
            f"'{min(recurring)}'): read as numbering that restarts in each, so keys are kept "
            f"apart per {each}; check it")
    return [f"{part}/{key}" if key is not None else None for key, part in zip(keys, parts)], note


def _sharing(keys: list) -> int:
    """Images whose key another image has too."""
    return sum(c for c in Counter(k.lower() for k in keys if k is not None).values() if c > 1)


def _keyless(sample: Sample) -> bool:
    """The layout gave this sample no key: its group is its own file name, stem or path."""
    path = _first_path(sample)
    name = os.path.basename(path)
    suffix = image_suffix(name)
    stem = name[: -len(suffix)] if suffix in IMAGE_SUFFIXES else name
    return sample.group in (path, name, stem, group_of(name)[0], _own(sample))


def _layout_kept(scan: ScanResult) -> dict:
    guess, source = scan.group_source.startswith(STAND_INS), scan.group_source
    warnings = [(f"patient key is a stand-in ({source}): one patient's images may be in "
                 "several groups and so on both sides; add a patient column")] if guess else []
    return _report([s.group for s in scan.samples], source, guess,
                   len(scan.samples) if guess else 0, f"from the dataset: {source}", "", warnings)


def _report(groups: list[str], source: str, guess: bool, guessed: int, rule: str,
            example: str, warnings: list[str]) -> dict:
    sizes = Counter(groups)
    largest = min(sizes.items(), key=lambda kv: (-kv[1], kv[0]), default=("", 0))
    return {"source": source, "guess": guess, "guessed_images": guessed, "rule": rule,
            "example": example, "num_groups": len(sizes),
            "images_sharing_a_patient": sum(c for c in sizes.values() if c > 1),
            "groups_with_several_images": sum(c > 1 for c in sizes.values()),
            "largest_group": {"key": largest[0], "images": largest[1]},
            "warnings": warnings}


def patient_keys(scan: ScanResult) -> tuple[list[str] | None, str, dict]:
    """(each sample's group, or None to keep the scan's; the grouping source; the report)."""
    samples = scan.samples
    layout = scan.group_source
    name_based = layout.startswith(NAME_BASED + STAND_INS[:1])
    if not layout.startswith("none") and not name_based:
        return None, layout, _layout_kept(scan)
    keys: list = [None] * len(samples)
    parts: dict[str, list] = {}   # source -> [images, guess, rule, example]
    warnings: list[str] = []
    if name_based:
        for i, s in enumerate(samples):
            if not _keyless(s):
                keys[i] = s.group
        n = len(samples) - keys.count(None)
        parts[layout] = [n, layout.startswith(STAND_INS), f"from the dataset: {layout}", ""]
        if n and layout.startswith(STAND_INS):
            warnings.append(f"patient key guessed from file names ({layout}) for {n} images: "
                            f"{_sharing(keys)} images share a patient with another image; "
                            "check it or add a patient column")
    for i, s in enumerate(samples):  # a patient word in the file name
        if keys[i] is None:
            key, matched = group_of(_first_path(s))
            if matched:
                keys[i] = key
                rule = "patient prefix of the file name (patient/person/subject/sub-/case…)"
                part = parts.setdefault("filename prefix", [0, False, rule, key])
                part[0] += 1
    rest = [i for i, k in enumerate(keys) if k is None]
    if len(rest) >= 4:
        subset = [samples[i] for i in rest]
        labels = {*scan.classes, *(s.label for s in subset)}
        found, hint = _guess(_names(subset, scan.root, labels), len({s.label for s in subset}))
        if found is not None:
            _scope_found(found, subset, scan)
            for i, key in zip(rest, found.keys):
                keys[i] = key
            n = sum(k is not None for k in found.keys)
            parts[found.source] = [n, found.guess, found.rule, found.example]
            sharing = _sharing(found.keys)
            if found.guess:
                kind = "folder names" if found.source.startswith("folder") else "file names"
                scope = f" for {n} of {len(samples)} images" if n < len(samples) else ""
                warnings.append(f"patient key guessed from {kind} {found.shown}{scope}: "
                                f"{sharing} images share a patient with another image; check "
                                "it or add a patient column")
            warnings.extend(found.warnings)
        elif hint:
            warnings.append(hint)
    parts = {k: v for k, v in parts.items() if v[0]}
    canon: dict[str, str] = {}
    groups = [canon.setdefault(k.lower(), k) if k is not None else _own(s)
              for k, s in zip(keys, samples)]
    left = keys.count(None)
    if not parts:
        report = _report(groups, NONE, False, 0, "every image is its own group", "", warnings)
        return None, NONE, report
    source = next(iter(parts)) if len(parts) == 1 and not left else "; ".join(
        f"{text} ({v[0]} images)" for text, v in parts.items()) + (
        f"; none ({left} images, one group each)" if left else "")
    guessed = sum(v[0] for v in parts.values() if v[1])
    rule = "; ".join(v[2] for v in parts.values())
    example = next((v[3] for v in sorted(parts.values(), key=lambda v: not v[1]) if v[3]), "")
    return groups, source, _report(groups, source, guessed > 0, guessed, rule, example,
                                   warnings)


def _scope_found(found: _Found, subset: list[Sample], scan: ScanResult) -> None:
    """Keep a guessed key apart per dataset split, then per class, where numbering restarts."""
    scopes = [(["test" if s.split == "test" else "train" for s in subset],
               "the dataset's train and test folders", "folder")] if scan.existing_split else []
    if scan.layout == "class_folders" and all(s.labels is None for s in subset):
        # only folder classes restart their numbering; a table's or a detector's labels do not
        scopes.append(([s.label for s in subset], "classes", "class"))
    for parts, what, each in scopes if found.guess else []:
        found.keys, note = _scope(found.keys, parts, what, each)
        found.warnings += [note] if note else []


def infer_patient_keys(scan: ScanResult) -> ScanResult:
    """The scan with its patient key inferred (see the module docstring); pure and idempotent.
    Call it once a scan is complete (scan_folder's end) — make_split calls it too."""
    if REPORT in (scan.details or {}):
        return scan
    groups, source, report = patient_keys(scan)
    samples = scan.samples if groups is None else [
        s if s.group == g else replace(s, group=g) for s, g in zip(scan.samples, groups)]
    return replace(scan, samples=samples, group_source=source,
                   details={**(scan.details or {}), REPORT: report})
