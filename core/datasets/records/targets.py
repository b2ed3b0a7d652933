"""Targets: every consistent combination of an image set and target field(s) the folder's
record sources offer, each as a recipe (core.datasets.records.recipe).

For each source: the field that names the most images (by relative path under any root
prefix, file name or stem — else by an id that is a run of the file stems' tokens, the way a
study id names ``<study>_frontal.png`` or a patient id names its slices); the grouping field
(the strongest evidence: a patient field; an id field that names several images; else the
path); the split field; then one target per field that can be one:

* a categorical field (``class``): diagnosis with its values as classes (integer codes named
  from the description when it says what they mean);
* a binary finding (``finding``): diagnosis of that finding (1 = the finding, 0 and — in a
  one-column-per-finding table — blank = ``no <finding>``, -1/uncertain left out); three or
  more findings also make one multi-label target;
* a field of several labels (``labels``): multi-label diagnosis;
* a field naming mask files: segmentation; COCO-like annotation lists: detection;
* free-text fields (findings / impression / report): report generation.

Continuous measures, ids, dates and acquisition or demographic attributes are never offered
as targets (a user may still edit a recipe to use one) — except a measure of a few values the
description names (a rating: "CDR: 0 none, 0.5 very mild, 1 mild").

May import: core.datasets.layouts (label_table_ids, tables, types), core.datasets.records.
"""
from __future__ import annotations

import re
from pathlib import Path

from core.datasets.layouts.inventory import kind_of
from core.datasets.layouts.label_table_ids import IdMatcher
from core.datasets.layouts.tables import NEGATIVES, code_mapping
from core.datasets.records.fields import MISSING, FieldInfo, profile
from core.datasets.records.recipe import Recipe
from core.datasets.records.sources import Source

MASK_FIELD = re.compile(r"mask|seg|label_?path|annotation_?path|gt|ground_?truth|roi", re.I)
FINDINGS_FIELD = re.compile(r"finding|report|text|caption|description|note", re.I)
IMPRESSION_FIELD = re.compile(r"impression|conclusion|summary", re.I)
MIN_IMAGES = 4


def _resolved(matcher: IdMatcher, values: list, use_ids: bool) -> tuple[int, set[str], bool]:
    """(rows that name an image, images named, whether some row names several)."""
    rows, named, several = 0, set(), False
    for value in values:
        if isinstance(value, list) or not str(value).strip():
            continue
        hits = matcher.find(str(value), use_ids)
        if hits:
            rows += 1
            named.update(str(h) for h in hits)
            several = several or len(hits) > 1
    return rows, named, several


def image_field(source: Source, matcher: IdMatcher, infos: dict[str, FieldInfo]
                ) -> tuple[str, str, set[str], bool] | None:
    """(field, match, images named, several per row) of the field naming the most images."""
    best = None
    sample = source.records[:3000]
    for name, info in infos.items():
        if info.role in ("annotations", "split", "constant", "finding", "text", "measure",
                         "coord", "labels") or MASK_FIELD.search(name) and name not in (
                             "__key__", "__file__", "__item__"):
            continue
        values = [r.get(name, "") for r in sample]
        for use_ids in (False, True):
            rows, named, several = _resolved(matcher, values, use_ids)
            if rows < max(2, 0.3 * info.filled) or len(named) < MIN_IMAGES:
                continue
            score = (len(named), not use_ids)
            if best is None or score > best[0]:
                best = (score, name, "id" if use_ids else "path", named, several)
            break
    return best[1:] if best else None


def _group_field(infos: dict[str, FieldInfo], image: str, match: str, several: bool) -> str:
    patients = [n for n, i in infos.items() if i.role == "patient" and n != image]
    if patients:
        return patients[0]
    if match == "id" and several:
        return image   # a patient or study id naming its images
    studies = [n for n, i in infos.items() if i.role == "study" and n != image and
               i.distinct < i.filled]
    return studies[0] if studies else ""


def _class_values(info: FieldInfo, description: str) -> dict[str, str | None]:
    """Each value's class: integer codes named from the description; missing markers (N/A,
    nan) left out."""
    codes = [c for c in info.counts if c.lower() not in MISSING]
    named = code_mapping(description, codes) if codes and all(
        re.fullmatch(r"-?\d+(?:\.0+)?", c) for c in codes) else {}
    out = {c: named.get(str(int(float(c))), c) if named else c for c in codes}
    return {**out, **{c: None for c in info.counts if c.lower() in MISSING}}


def _finding_values(name: str, info: FieldInfo, blanks_negative: bool) -> dict:
    return {"pos": name, "neg": f"no {name}", "uncertain": None,
            "blank": f"no {name}" if blanks_negative else None}


def _report_fields(infos: dict[str, FieldInfo]) -> list[str]:
    texts = [n for n, i in infos.items() if i.role == "text"]
    findings = sorted((n for n in texts if FINDINGS_FIELD.search(n) and
                       not IMPRESSION_FIELD.search(n)),
                      key=lambda n: not re.search("finding", n, re.I))
    impression = [n for n in texts if IMPRESSION_FIELD.search(n)]
    if findings or impression:
        return [(findings or impression)[0], (impression or [""])[0] if findings else ""]
    return [max(texts, key=lambda n: infos[n].filled)] if texts else []


def source_targets(source: Source, images: list[Path], root: Path, matcher: IdMatcher,
                   description: str = "", every: IdMatcher | None = None) -> list[Recipe]:
    """The recipes of every target ``source`` offers (best-supported first). ``matcher``
    names images (masks left out), ``every`` any file (masks included)."""
    every = every or matcher
    infos = profile(source.records)
    found = image_field(source, matcher, infos)
    if found is None:
        return []
    image, match, _named, several = found
    group = _group_field(infos, image, match, several)
    split = next((n for n, i in infos.items() if i.role == "split"), "")
    base = dict(source=source.name, image_field=image, match=match, group_field=group,
                split_field=split)
    out: list[Recipe] = []
    findings = [n for n, i in infos.items() if i.role == "finding" and n != image and
                not negative_name(n)]
    blanks = len(findings) >= 3   # a one-column-per-finding table: blank = not mentioned
    for name, info in infos.items():
        if name in (image, group, split):
            continue
        described = _class_values(info, description) if info.role == "finding" else {}
        if info.role == "finding" and name in findings and any(
                k != v for k, v in described.items()) and len(set(described.values())) >= 2:
            # 0/1 codes the description names ("0 normal, 1 TB"): classes, not a finding
            out.append(Recipe(**base, role="class", fields=[name], name=name, values=described))
        elif info.role == "finding" and name in findings:
            out.append(Recipe(**base, role="finding", fields=[name], name=name,
                              values=_finding_values(name, info, blanks)))
        elif info.role == "class":
            values = _class_values(info, description)
            if len(set(values.values())) >= 2:
                out.append(Recipe(**base, role="class", fields=[name], name=name,
                                  values=values))
        elif info.role == "measure" and 2 <= info.distinct <= 10 and \
                _named_in(name, description):
            # a rating the description names ("CDR: 0 none, 0.5 very mild, 1 mild"): classes
            out.append(Recipe(**base, role="class", fields=[name], name=name,
                              values={c: None if c.lower() in MISSING else c
                                      for c in info.counts}))
        elif info.role == "labels":
            out.append(Recipe(**base, role="labels", fields=[name], name=name))
        elif info.role == "annotations":
            out.append(Recipe(**base, role="annotations", fields=[name], name="boxes"))
        elif info.role in ("id", "other", "study") and MASK_FIELD.search(name):
            values = [r.get(name, "") for r in source.records[:3000]]
            rows, named, _ = _resolved(every, values, False)
            if rows >= 0.5 * info.filled and len(named) >= MIN_IMAGES:
                out.append(Recipe(**base, role="mask", fields=[name], name=name))
    if len(findings) >= 3:
        out.append(Recipe(**base, role="findings", fields=findings, name="findings",
                          values={f: f for f in findings}))
    report = _report_fields(infos)
    if report:
        out.append(Recipe(**base, role="report", fields=[f for f in report if f] or report,
                          name="report"))
    return out


def _named_in(name: str, description: str) -> bool:
    """The description names the field (``CDR``, ``'Grade'``) as a word."""
    return len(name) >= 2 and bool(re.search(r"(?<![\w])" + re.escape(name) + r"(?![\w])",
                                             description or "", re.I))


def is_mask_file(path: str) -> bool:
    return kind_of(Path(path).name, tuple(Path(path).parent.parts)) == "segmentation"


def negative_name(name: str) -> bool:
    return name.lower() in NEGATIVES or name.lower().startswith("no ")
