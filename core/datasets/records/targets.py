"""Targets: every consistent combination of an image set and target field(s) the folder's
record sources offer, each as a recipe (core.datasets.records.recipe).

For each source: the field that names the most images (by relative path under any root
prefix, file name or stem — else by an id that is a run of the file stems' tokens, the way a
study id names ``<study>_frontal.png`` or a patient id names its slices); the grouping field
(the strongest evidence: a patient field; an id field that names several images; else the
path); the split field; then one target per field that can be one:

* a categorical field (``class``): diagnosis with its values as classes (integer codes named
  from the description when it says what they mean; a 0/1 field named like a label —
  ``label``, ``class``, ``target`` — is codes too, not a finding);
* a binary finding (``finding``): diagnosis of that finding (1 = the finding, 0 and — in a
  one-column-per-finding table — blank = ``no <finding>``, -1/uncertain left out);
* one-hot columns: two or more 0/1 columns with exactly one set per row are one multi-class
  target (``one_hot``: the column set is the class); three or more binary columns otherwise
  make one multi-label target (``findings``), a negative column (``No Finding``) meaning none;
* a field of several labels (``labels``: ``A|B``, a quoted ``A,B``, a JSON list): multi-label
  diagnosis, negatives (``No Finding``, ``normal``) an empty label list;
* a field naming mask files: segmentation; COCO-like annotation lists: detection;
* free-text fields (findings / impression / report): report generation.

Continuous measures, ids, dates and acquisition or demographic attributes are never offered
as targets (a user may still edit a recipe to use one) — except a measure of a few values the
description names (a rating: "CDR: 0 none, 0.5 very mild, 1 mild").

The diagnosis targets of a source come in the order a reader would pick them: the field the
description names as the label ("label column: outcome"), then one-hot columns, then fields
named like a label, then the others — within each, the field whose values the description
names as classes first. A field the description names beside "patient" / "split by" is the
grouping field when no field is named like a patient key.

May import: core.datasets.layouts (inventory, label_table_ids, study_folders, tables, types),
core.datasets.records.
"""
from __future__ import annotations

import re
from pathlib import Path

from core.datasets.layouts.inventory import is_mask_path
from core.datasets.layouts.label_table_ids import IdMatcher
from core.datasets.layouts.study_folders import folder_reading
from core.datasets.layouts.tables import (LABEL_NAME, NEGATIVES, code_mapping, described_column,
                                          described_finding)
from core.datasets.records.fields import (MISSING, ORIGIN, FieldInfo, binary_value,
                                          polarity_pair, profile)
from core.datasets.records.recipe import LABEL_ROLES, Recipe
from core.datasets.records.sources import Source

MASK_FIELD = re.compile(r"mask|seg|label_?path|annotation_?path|gt|ground_?truth|roi", re.I)
FINDINGS_FIELD = re.compile(r"finding|report|text|caption|description|note", re.I)
IMPRESSION_FIELD = re.compile(r"impression|conclusion|summary", re.I)
MIN_IMAGES = 4
LABEL_WORDS = re.compile(r"\b(?:labels?|labell?ed|diagnos\w*|class(?:es)?|classif\w*|targets?|"
                         r"outcomes?|categor\w*|findings?|grades?|marks|marked|indicates)\b",
                         re.I)
PATIENT_WORDS = re.compile(r"\b(?:patients?|subjects?|participants?|split by|group(?:ed)? by|"
                           r"grouping)\b", re.I)
# a 0/1 field with one of these names holds class codes, not one finding
CODE_FIELD = re.compile(r"^(?:label|labels|class|target|y|diagnosis|outcome|category|group)"
                        r"(?:[ _]?(?:id|code|value))?$", re.I)
GROUP_ROLES = ("class", "id", "other", "patient", "study")
PROBE = 3000            # rows that choose the image field
FULL_ROWS = 200_000     # rows counted when the first ones are inconclusive


def _resolved(matcher: IdMatcher, values: list, use_ids: bool, nears: list | None = None
              ) -> tuple[int, set[str], bool]:
    """(rows that name an image, images named, whether some row names several); ``nears``:
    each row's table folder (a name several folders hold is the one beside the table)."""
    rows, named, several = 0, set(), False
    for number, value in enumerate(values):
        if isinstance(value, list) or not str(value).strip():
            continue
        hits = matcher.find(str(value), use_ids, nears[number] if nears else None)
        if hits:
            rows += 1
            named.update(str(h) for h in hits)
            several = several or len(hits) > 1
    return rows, named, several


def _nears(records: list[dict]) -> list:
    return [r.get(ORIGIN) for r in records]


def image_field(source: Source, matcher: IdMatcher, infos: dict[str, FieldInfo]
                ) -> tuple[str, str, set[str], bool] | None:
    """(field, match, images named, several per row) of the field naming the most images: by
    path, name or stem if a field does, else by id. A field must name images in 30% of its
    first rows — or, in a long table of which only some images were downloaded, half the
    images over all its rows."""
    best, missed = None, []
    sample = source.records[:PROBE]
    for name, info in infos.items():
        if info.role in ("annotations", "split", "constant", "finding", "text", "measure",
                         "coord", "labels") or MASK_FIELD.search(name) and name not in (
                             "__key__", "__file__", "__item__"):
            continue
        values = [r.get(name, "") for r in sample]
        filled = sum(1 for v in values if not isinstance(v, list) and str(v).strip())
        for use_ids in (False, True):
            rows, named, several = _resolved(matcher, values, use_ids, _nears(sample))
            if rows < max(2, 0.3 * filled) or len(named) < MIN_IMAGES:
                missed.append((rows, name, use_ids))
                continue
            score = (len(named), not use_ids)
            if best is None or _better(score, best[0]):
                best = (score, name, "id" if use_ids else "path", named, several)
            break
    if best is None and len(source.records) > len(sample):
        best = _over_every_row(source, matcher, missed)
    return best[1:] if best else None


def _better(score: tuple[int, bool], than: tuple[int, bool]) -> bool:
    """A field naming images by path beats one naming them by id unless the id names more
    than twice as many (ODIR's ``Left-Fundus`` over its patient ``ID``, which names both eyes:
    the other eye's field is read beside it)."""
    (count, by_path), (other, other_by_path) = score, than
    if by_path != other_by_path:
        return count * 2 >= other if by_path else count > 2 * other
    return score > than


def _over_every_row(source: Source, matcher: IdMatcher, missed: list) -> tuple | None:
    """The field naming at least half the images over every row (up to FULL_ROWS), from the
    fields whose first rows named some (else all of them): a big table, few images."""
    hit = [m for m in missed if m[0]] or missed
    best = None
    for _, name, use_ids in hit:
        values = [r.get(name, "") for r in source.records[:FULL_ROWS]]
        rows, named, several = _resolved(matcher, values, use_ids,
                                         _nears(source.records[:FULL_ROWS]))
        if rows >= 2 and len(named) >= max(MIN_IMAGES, 0.5 * len(matcher.images)):
            score = (len(named), not use_ids)
            if best is None or score > best[0]:
                best = (score, name, "id" if use_ids else "path", named, several)
    return best


# fields without a name of their own: a header-less column, a part of the file or folder names
UNNAMED = re.compile(r"column_?\d+|unnamed:? ?\d+|field_?\d+|col_?\d+|\d+|"
                     r"(?:folder )?name part -?\d+", re.I)


def _more_image_fields(source: Source, matcher: IdMatcher, infos: dict[str, FieldInfo],
                       image: str, match: str, named: set[str]) -> list[str]:
    """Other fields of the same records that name other images the same way (ODIR's
    ``Right-Fundus`` beside ``Left-Fundus``; a mammogram table's CC and MLO views)."""
    out, seen = [], set(named)
    sample = source.records[:PROBE]
    for name, info in infos.items():
        if name == image or info.role not in ("id", "other", "study", "class") or \
                MASK_FIELD.search(name):
            continue
        values = [r.get(name, "") for r in sample]
        filled = sum(1 for v in values if not isinstance(v, list) and str(v).strip())
        rows, hits, _ = _resolved(matcher, values, match == "id", _nears(sample))
        if rows >= max(2, 0.3 * filled) and len(hits) >= MIN_IMAGES and not hits & seen:
            out.append(name)
            seen |= hits
    return out


def _group_field(infos: dict[str, FieldInfo], image: str, match: str, several: bool,
                 description: str = "") -> str:
    patients = [n for n, i in infos.items() if i.role == "patient" and n != image]
    if patients:
        return patients[0]
    if description:   # "split by donor": the field the description names beside patients
        label = described_column(description, [n for n in infos if n != image], LABEL_WORDS)
        options = [n for n, i in infos.items() if i.role in GROUP_ROLES and
                   n not in (image, label) and 1 < i.distinct < i.filled]
        named = described_column(description, options, PATIENT_WORDS, window=40)
        if named:
            return named
    if match == "id" and several:
        return image   # a patient or study id naming its images
    studies = [n for n, i in infos.items() if i.role == "study" and n != image and
               i.distinct < i.filled]
    return studies[0] if studies else ""


def _class_values(info: FieldInfo, description: str) -> dict[str, str | None]:
    """Each value's class: integer codes named from the description, in code order (other
    values by name); missing markers (N/A, nan) left out."""
    codes = [c for c in info.counts if c.lower() not in MISSING]
    integers = bool(codes) and all(re.fullmatch(r"-?\d+(?:\.0+)?", c) for c in codes)
    codes.sort(key=float if integers else str)   # classes in code order, else by name
    named = code_mapping(description, codes) if integers else {}
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


def _exactly_one(records: list[dict], fields: list[str]) -> bool:
    """Every record has exactly one of ``fields`` set (one-hot single-label columns)."""
    return bool(fields) and all(
        sum(binary_value(r.get(f, "")) == "pos" for f in fields) == 1 for r in records[:PROBE])


def source_targets(source: Source, images: list[Path], root: Path, matcher: IdMatcher,
                   description: str = "", every: IdMatcher | None = None) -> list[Recipe]:
    """The recipes of every target ``source`` offers, the diagnosis targets in the order a
    reader picks them (see the module docstring). ``matcher`` names images (masks left out),
    ``every`` any file (masks included)."""
    every = every or matcher
    infos = profile(source.records)
    found = image_field(source, matcher, infos)
    if found is None:
        return []
    image, match, named, several = found
    more = _more_image_fields(source, matcher, infos, image, match, named)
    group = _group_field(infos, image, match, several, description)
    if more and not group:   # one row per patient or eye pair: its images are one group
        group = next((n for n, i in infos.items() if i.role in ("id", "study") and
                      n not in (image, *more)), "")
    split = next((n for n, i in infos.items() if i.role == "split"), "")
    folders = [Path(p) for p in named if Path(p).is_dir()]
    base = dict(source=source.name, image_field=image, match=match, group_field=group,
                split_field=split, extra_image_fields=more,
                folders=folder_reading(folders, matcher.members, description) if folders
                else "")
    image_fields = {image, *more}
    out: list[Recipe] = []
    binary = [n for n, i in infos.items() if i.role == "finding" and
              n not in (*image_fields, group, split) and not CODE_FIELD.match(n.strip())]
    findings = [n for n in binary if not negative_name(n)]
    one_hot = len(binary) >= 2 and _exactly_one(source.records, binary)
    blanks = len(binary) >= 3   # a one-column-per-finding table: blank = not mentioned
    for name, info in infos.items():
        if name in (*image_fields, group, split):
            continue
        described = _class_values(info, description) if info.role == "finding" else {}
        if info.role == "finding" and (CODE_FIELD.match(name.strip()) or (name in findings and any(
                k != v for k, v in described.items()) and len(set(described.values())) >= 2)):
            # 0/1 codes of a label field, or codes the description names ("0 normal, 1 TB"):
            # classes, not a finding
            out.append(Recipe(**base, role="class", fields=[name], name=name, values=described))
        elif info.role == "finding" and UNNAMED.fullmatch(name.strip()):
            # a header-less 0/1 column: classes named as the description names the two
            # outcomes ("labelled normal or abnormal"), else by their values
            pair = polarity_pair(description)
            values = {raw: {"neg": pair[0], "pos": pair[1]}.get(binary_value(raw) or "")
                      if pair else raw if binary_value(raw) in ("pos", "neg") else None
                      for raw in info.counts}
            out.append(Recipe(**base, role="class", fields=[name], name=name, values=values))
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
            # boxes without a class of their own: the one finding the description names
            finding = described_finding(description) if not _has_category(source, name) else ""
            out.append(Recipe(**base, role="annotations", fields=[name], name="boxes",
                              values={"lesion": finding} if finding else {}))
        elif info.role in ("id", "other", "study") and MASK_FIELD.search(name):
            values = [r.get(name, "") for r in source.records[:PROBE]]
            rows, named, _ = _resolved(every, values, False)
            if rows >= 0.5 * info.filled and len(named) >= MIN_IMAGES:
                out.append(Recipe(**base, role="mask", fields=[name], name=name))
    if one_hot:
        out.append(Recipe(**base, role="one_hot", fields=binary, name="one-hot classes",
                          values={f: f for f in binary}))
    elif blanks and len(findings) >= 2:
        out.append(Recipe(**base, role="findings", fields=findings, name="findings",
                          values={f: f for f in findings}))
    report = _report_fields(infos)
    if report:
        out.append(Recipe(**base, role="report", fields=[f for f in report if f] or report,
                          name="report"))
    return _in_reading_order(out, infos, description)


def _has_category(source: Source, name: str) -> bool:
    """Whether the boxes of a field carry their class (COCO's category)."""
    return any(isinstance(b, dict) and ("category" in b or "category_id" in b)
               for r in source.records[:PROBE] for b in (r.get(name) or [])
               if isinstance(r.get(name), list))


def described_field(recipes: list[Recipe], description: str) -> str | None:
    """The field of one of ``recipes`` the description names as the label ("label column:
    outcome", "'aclDiagnosis' holds the label"), or None."""
    fields = [r.fields[0] for r in recipes if r.role in LABEL_ROLES and len(r.fields) == 1]
    return described_column(description, fields, LABEL_WORDS) if description and fields \
        else None


def _mentioned(description: str, info: FieldInfo | None) -> int:
    """How many of a field's values the description names as words (class names)."""
    if not description or info is None or len(info.counts) > 50:
        return 0
    return sum(bool(re.search(r"(?<![\w])" + re.escape(v) + r"(?![\w])", description, re.I))
               for v in info.counts if v and not re.fullmatch(r"-?[\d.]+", v))


def _in_reading_order(recipes: list[Recipe], infos: dict[str, FieldInfo],
                      description: str) -> list[Recipe]:
    """The diagnosis recipes in the order a reader picks a label (see the module docstring),
    the others after them as they came."""
    diagnosis = [r for r in recipes if r.role in LABEL_ROLES]
    described = described_field(diagnosis, description)
    several = [r for r in diagnosis if len(r.fields) > 1]

    def key(item):
        position, r = item
        info = infos.get(r.fields[0])
        if len(r.fields) == 1 and r.fields[0] == described and \
                not any(described in s.fields for s in several):
            return (0, 0, 0, position)
        if len(r.fields) > 1:
            return (1, 0, 0, position)
        if LABEL_NAME.search(r.fields[0]):
            return (2, -_mentioned(description, info), r.role == "finding", position)
        return (3, -_mentioned(description, info), info.distinct if info else 0, position)

    ordered = [r for _, r in sorted(enumerate(diagnosis), key=key)]
    return ordered + [r for r in recipes if r.role not in LABEL_ROLES]


def _named_in(name: str, description: str) -> bool:
    """The description names the field (``CDR``, ``'Grade'``) as a word."""
    return len(name) >= 2 and bool(re.search(r"(?<![\w])" + re.escape(name) + r"(?![\w])",
                                             description or "", re.I))


def is_mask_file(path: str) -> bool:
    return is_mask_path(path)


def negative_name(name: str) -> bool:
    return name.lower() in NEGATIVES or name.lower().startswith("no ")
