"""A recipe: one reading of a dataset folder as data the user can read and edit, and its
application to the folder (a ScanResult).

A recipe names a record source (core.datasets.records.sources), the field that names the images
and how it names them (``path``: a relative path, a file name or a stem; ``id``: an id that is a
run of the file stem's tokens, so one row may label several images — a patient's slices), the
target (its role and field(s), and a value map from raw values to class names, ``null`` leaving
a value out), the grouping field (else the patient prefix or case folder of the path) and the
split field. It is kept in the datacard (``targets[i]["recipe"]``), printed by
``crew register --json`` and taken back by ``crew register --recipe FILE``. Three more parts
say how a record's files become samples: ``extra_image_fields`` (the views other fields name:
the channels of one sample), ``folders`` (a named folder is one ``scan`` of slices, or a study
whose ``images`` are samples each) and ``variant`` (the one processed version of a scan kept
when a record names several).

Roles: ``class`` (one categorical field), ``finding`` (one binary finding: its values
``pos``/``neg``/``uncertain``/``blank`` mapped to the finding, ``no <finding>`` or left out),
``one_hot`` (several 0/1 fields, exactly one set per row: the field set is the class; a row
with none or several set is left out), ``findings`` (multi-label over several binary finding
fields), ``labels`` (a field holding
several labels), ``mask`` (a field naming each image's mask), ``annotations`` (COCO-like boxes
per image), ``report`` (findings and impression text fields).

May import: core.datasets.layouts (types, common, label_table_ids, array_headers, mask_labels,
tables, study_folders), core.datasets.records (sources, fields, channels, sample_rules,
variants).
"""
from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from core.datasets.layouts.array_headers import array_shape, dimension_of_shape, header_dimension
from core.datasets.layouts.common import (SPLITS, common_parent, group_for, group_source,
                                          held_out_splits, shared_folders)
from core.datasets.layouts.label_table_ids import IdMatcher
from core.datasets.layouts.tables import NEGATIVES
from core.datasets.layouts.types import (FORMAT_OF_SUFFIX, Sample, ScanError, ScanResult,
                                         image_suffix)
from core.datasets.records.channels import channel_units, choose_channels
from core.datasets.layouts.study_folders import IMAGES, folder_images
from core.datasets.records.fields import ORIGIN, binary_value, split_labels
from core.datasets.records.sources import Source
from core.datasets.records.sample_rules import split_from_folders, without_rare_labels
from core.datasets.records.variants import choose_variant, keep_variant, one_format

LABEL_ROLES = ("class", "finding", "one_hot", "findings", "labels")   # values are classes
ROLES = {**{role: "diagnosis" for role in LABEL_ROLES}, "mask": "segmentation",
         "annotations": "anomaly_detection", "report": "report_generation"}
LAYOUT_OF_TASK = {"diagnosis": "label_table", "segmentation": "image_mask_folders",
                  "anomaly_detection": "box_table", "report_generation": "report_table"}
MATCHES = ("path", "id")
MAX_LISTED = 1000      # rows naming no image, images no row names: listed one by one up to this


class RecipeError(ValueError):
    """A recipe that cannot be used; the message says which part and what to do."""


@dataclass
class Recipe:
    source: str
    image_field: str
    role: str
    fields: list[str]
    match: str = "path"
    values: dict[str, str | None] = field(default_factory=dict)
    group_field: str = ""
    split_field: str = ""
    name: str = ""
    version: int = 1
    # more fields naming images of the same record (ODIR's Left-Fundus and Right-Fundus): each
    # image is a sample with the record's label
    extra_image_fields: list[str] = field(default_factory=list)
    # a record naming a folder: ``scan`` (its 2D images are the slices of one volume) or
    # ``images`` (a study: each image is a sample with the record's label); layouts.study_folders
    folders: str = ""
    # a record naming several processed versions of one scan: the version kept (its path
    # signature, records.variants); "" when records name one file each
    variant: str = ""

    @property
    def task(self) -> str:
        return ROLES[self.role]

    def to_json(self) -> dict:
        return {**asdict(self), "task": self.task}

    @classmethod
    def from_json(cls, data: dict, where: str = "the recipe") -> "Recipe":
        if not isinstance(data, dict):
            raise RecipeError(f"{where} is not a JSON object; give one recipe object (as "
                              "`crew register --json` prints under targets[].recipe)")
        missing = [k for k in ("source", "image_field", "role", "fields") if not data.get(k)]
        if missing:
            raise RecipeError(f"{where} lacks {', '.join(missing)}: a recipe names its "
                              "source, image_field, role and fields")
        if data["role"] not in ROLES:
            raise RecipeError(f"{where}: role {data['role']!r} is not one of "
                              f"{', '.join(ROLES)}")
        if data.get("match", "path") not in MATCHES:
            raise RecipeError(f"{where}: match {data['match']!r} is not 'path' or 'id'")
        fields = data["fields"]
        if isinstance(fields, str):
            fields = [fields]
        values = data.get("values") or {}
        if not isinstance(values, dict) or not all(isinstance(v, (str, type(None)))
                                                   for v in values.values()):
            raise RecipeError(f"{where}: values must map raw values to class names (or null "
                              "to leave those rows out)")
        more = data.get("extra_image_fields") or []
        if isinstance(more, str):
            more = [more]
        folders = str(data.get("folders") or "")
        if folders not in ("", "scan", "images"):
            raise RecipeError(f"{where}: folders {folders!r} is not 'scan' (a folder's 2D "
                              "images are one volume) or 'images' (each is a sample)")
        return cls(str(data["source"]), str(data["image_field"]), data["role"],
                   [str(f) for f in fields], data.get("match", "path"),
                   {str(k): v for k, v in values.items()}, str(data.get("group_field") or ""),
                   str(data.get("split_field") or ""), str(data.get("name") or ""),
                   extra_image_fields=[str(f) for f in more], folders=folders,
                   variant=str(data.get("variant") or ""))


def load_recipe(path: str | os.PathLike) -> Recipe:
    """A recipe from a JSON file (the object itself, or a target holding it as ``recipe``)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RecipeError(f"cannot read the recipe file {path}: {exc}") from exc
    if isinstance(data, dict) and isinstance(data.get("recipe"), dict):
        data = data["recipe"]
    return Recipe.from_json(data, f"the recipe file {path}")


# --------------------------------------------------------------------------- applying
def _label_of(recipe: Recipe, record: dict) -> tuple[str | None, list[str] | None, dict]:
    """(single label or None to leave the row out, labels for multi-label, extra)."""
    role, f0 = recipe.role, recipe.fields[0]
    if role == "class":
        raw = str(record.get(f0, "")).strip()
        if not raw:
            return None, None, {}
        return recipe.values.get(raw, raw), None, {}
    if role == "finding":
        kind = binary_value(record.get(f0, ""))
        return (recipe.values.get(kind or "", None) if kind else None), None, {}
    if role == "findings":
        names = [recipe.values.get(f, f) or f for f in recipe.fields
                 if binary_value(record.get(f, "")) == "pos"]
        return (names[0] if names else "(none)"), names, {}
    if role == "one_hot":
        names = [recipe.values.get(f, f) for f in recipe.fields
                 if binary_value(record.get(f, "")) == "pos"]
        return (names[0] if len(names) == 1 else None), None, {}
    if role == "labels":
        names = []
        for token in split_labels(record.get(f0, "")):
            name = recipe.values.get(token, token)
            if name and name.lower() not in NEGATIVES and name not in names:
                names.append(name)
        return (names[0] if names else "(none)"), names, {}
    if role == "mask":
        return "case", None, {}
    if role == "report":
        findings = str(record.get(recipe.fields[0], "") or "").strip()
        impression = str(record.get(recipe.fields[1], "") or "").strip() \
            if len(recipe.fields) > 1 else ""
        if not (findings or impression):
            return None, None, {}
        return "report", None, {"findings": findings, "impression": impression}
    if role == "annotations":
        boxes, labels = [], []
        for ann in record.get(f0) or []:
            bbox = ann.get("bbox")
            if not isinstance(bbox, list) or len(bbox) != 4:
                continue
            x, y, w, h = (float(v) for v in bbox)
            if w <= 0 or h <= 0:
                continue
            boxes.append([x, y, x + w, y + h])
            raw = str(ann.get("category", ann.get("category_id", "lesion")))
            labels.append(recipe.values.get(raw, raw) or raw)
        return ("positive" if boxes else "negative"), None, {"boxes": boxes, "labels": labels}
    return None, None, {}


def _where(source: Source, number: int) -> str:
    """Where a record sits, as the user finds it: a table's row (its header is row 1)."""
    if source.kind == "table" and " + " not in source.name:
        return f"{source.name} row {number + 2}"
    return f"{source.name} record {number + 1}"


def _dimension(paths: list[Path], fmt: str) -> str:
    if fmt in ("nifti", "nrrd", "mha", "analyze") and paths and paths[0].is_file():
        return header_dimension(paths[0]) or "3D"   # the header says, not the suffix
    if fmt in ("nifti", "nrrd", "mha", "analyze", "slices"):
        return "3D"
    if fmt in ("npy", "npz", "pt") and paths:
        shape, _ = array_shape(paths[0])
        return dimension_of_shape(shape) or "2D"
    return "2D"


def _images_named(recipe: Recipe, record: dict, matcher: IdMatcher) -> list[Path]:
    """The image files (or slice folders) a record names in its image field(s); a study
    folder's images one by one when the recipe says folders are studies."""
    out: list[Path] = []
    for name in [recipe.image_field, *recipe.extra_image_fields]:
        ref = record.get(name, "")
        hits = matcher.find(ref, recipe.match == "id", record.get(ORIGIN)) if ref else []
        hits = [h for h in hits if h.is_file()] if recipe.match == "id" else hits
        for hit in hits:
            if recipe.folders == IMAGES and hit.is_dir():
                out += [p for p in folder_images(hit, matcher.members) if p not in out]
            elif hit not in out:
                out.append(hit)
    return out


def _units(recipe: Recipe, record: dict, hits: list[Path], matcher: IdMatcher) -> list:
    """The samples a record's images make: the views its image fields name as the channels of
    one sample ({field: path}; every view named once), else each image, or the sequences of one
    exam as channels (records.channels)."""
    if recipe.role == "mask":
        return hits
    if recipe.extra_image_fields:
        views = {}
        for name in [recipe.image_field, *recipe.extra_image_fields]:
            ref = record.get(name, "")
            found = matcher.find(ref, recipe.match == "id", record.get(ORIGIN)) if ref else []
            if len(found) == 1:
                views[name] = found[0]
        return [views] if len(views) >= 2 else list(views.values())
    return channel_units(hits)


def apply_recipe(root: Path, recipe: Recipe, source: Source, images: list[Path],
                 matcher: IdMatcher | None = None, mask_names=None,
                 mask_matcher: IdMatcher | None = None) -> ScanResult:
    """The ScanResult the recipe reads from ``source`` (ScanError when it reads nothing).
    ``matcher`` names the images (masks left out), ``mask_matcher`` the masks (every file)."""
    matcher = matcher or IdMatcher(images, root)
    mask_matcher = mask_matcher or matcher
    entries: dict[str, dict] = {}
    skipped, unmatched, conflicts, unlabelled = [], [], {}, 0
    named = [(str(r.get(recipe.image_field, "")), _images_named(recipe, r, matcher))
             for r in source.records]
    if not recipe.variant and recipe.role != "mask":
        variant, versions = choose_variant(named)
        if variant:   # the caller's recipe is left as it was; this reading's says which
            recipe = replace(recipe, variant=variant)
            skipped.append(f"each record names {len(versions)} versions of its scan; kept "
                           f"{variant} (the recipe's 'variant'; others: "
                           f"{', '.join(v for v in versions if v != variant)[:300]})")
    for number, record in enumerate(source.records):
        ref = record.get(recipe.image_field, "")
        hits = one_format(keep_variant(named[number][1], named[number][0], recipe.variant))
        versions = [str(h) for h in named[number][1] if h not in hits]   # read, left out
        if not hits:
            unmatched.append(f"{_where(source, number)}: {str(ref)[:80]!r} names no image file")
            continue
        label, labels, extra = _label_of(recipe, record)
        if label is None:
            unlabelled += 1
            continue
        if recipe.role == "mask":
            mask = mask_matcher.find(record.get(recipe.fields[0], ""), False)
            if not mask:
                skipped.append(f"{ref}: its mask {record.get(recipe.fields[0])!r} is not in "
                               "the folder")
                continue
            label, extra = "case", {"label_path": str(mask[0])}
        group = str(record.get(recipe.group_field, "") or "").strip() \
            if recipe.group_field else ""
        split = str(record.get(recipe.split_field, "") or "").strip().lower() \
            if recipe.split_field else ""
        for unit in _units(recipe, record, hits, matcher):
            path = unit if isinstance(unit, Path) else next(iter(sorted(unit.values())))
            key = str(path) if isinstance(unit, Path) else \
                "|".join(str(p) for p in sorted(unit.values()))
            if key in entries:
                if entries[key]["label"] != label or entries[key]["labels"] != labels:
                    first = entries[key]["labels"] or entries[key]["label"]
                    conflicts.setdefault(key, f"{path}: rows give different labels ({first} "
                                              f"and {labels or label}) in {source.name}; "
                                              "left out")
                    entries[key]["conflict"] = True
                continue
            if versions:
                extra = {**extra, "other_files": versions}
            entries[key] = {"path": path, "label": label, "labels": labels, "extra": extra,
                            "group": group, "split": split,
                            "channels": None if isinstance(unit, Path) else unit}
    entries = {k: e for k, e in entries.items() if not e.get("conflict")}
    if not recipe.split_field:   # no split field: the split folders the images sit in
        split_from_folders(list(entries.values()), root)
    channels, notes = choose_channels([e["channels"] for e in entries.values() if e["channels"]],
                                      keep_order=[recipe.image_field, *recipe.extra_image_fields])
    skipped += notes
    for k, e in list(entries.items()):
        if e["channels"] is not None:
            if not all(ch in e["channels"] for ch in channels):
                lacking = ", ".join(c for c in channels if c not in e["channels"])
                skipped.append(f"{e['path'].parent.name}/{e['path'].name}: its record lacks "
                               f"channel(s) {lacking}; left out")
                del entries[k]
                continue
            e["image"] = [str(e["channels"][ch]) for ch in channels]
            others = [str(p) for ch, p in e["channels"].items() if ch not in channels]
            if others:   # read and left out on purpose (another orientation): explained
                e["extra"] = {**e["extra"], "other_files": others}
    if not entries:
        raise ScanError(f"the reading of {source.name} by field {recipe.image_field!r} and "
                        f"{recipe.role} {', '.join(recipe.fields)} names no image of the "
                        f"folder with a usable value; check the recipe's fields and values")
    mapping = held_out_splits([SPLITS.get(e["split"], "") for e in entries.values()])
    samples, sources = [], []
    base = common_parent([e["path"] for e in entries.values()], root)
    shared = shared_folders([e["path"] for e in entries.values()], base)
    for e in entries.values():
        group, how = e["group"], f"table column {recipe.group_field!r}"
        if not group:
            group, how = group_for(e["path"], base, shared)
        sources.append(how)
        split = SPLITS.get(e["split"], "")
        samples.append(Sample(e.get("image") or str(e["path"]), e["label"], group,
                              mapping.get(split, split),
                              e["labels"], e["extra"]))
    skipped += unmatched[:MAX_LISTED] + list(conflicts.values())[:MAX_LISTED]
    if len(unmatched) > MAX_LISTED:
        skipped.append(f"{len(unmatched)} rows of {source.name} name no image of the folder")
    if unlabelled:
        skipped.append(f"{unlabelled} rows of {source.name} have no usable value of "
                       f"{recipe.name or ', '.join(recipe.fields)}; left out")
    if recipe.role in ("findings", "labels"):
        samples, note = without_rare_labels(samples)
        skipped += note
    task, mask_facts = recipe.task, {}
    if recipe.role in LABEL_ROLES:
        counts = Counter(l for s in samples for l in s.label_list()) \
            if recipe.role in ("findings", "labels") else Counter(s.label for s in samples)
        ordered = [v for v in recipe.values.values() if v and v in counts]
        classes = list(dict.fromkeys(ordered + sorted(counts)))
    elif recipe.role == "annotations":
        counts = Counter(l for s in samples for l in s.extra.get("labels", []))
        classes = sorted(counts)
    elif recipe.role == "mask":
        names, mask_facts = (mask_names or (lambda masks: (["lesion"], {})))(
            [Path(s.extra["label_path"]) for s in samples])
        classes, counts = names, Counter({n: len(samples) for n in names})
    else:
        classes, counts = [], Counter()
    first = [Path(s.image[0] if isinstance(s.image, list) else s.image) for s in samples[:20]]
    suffixes = Counter(image_suffix(p.name) for p in first)
    fmt = FORMAT_OF_SUFFIX.get(suffixes.most_common(1)[0][0], "") if suffixes else ""
    if any(p.is_dir() for p in first):
        fmt = "slices"   # a row names a folder of 2D slices: one 3D scan
    splits = {s.split for s in samples}
    listed = {p for s in samples for p in (s.image if isinstance(s.image, list) else [s.image])}
    details = {"recipe": recipe.to_json(), "source": f"{source.name} ({recipe.role} "
               f"{', '.join(recipe.fields[:3])}{' ...' if len(recipe.fields) > 3 else ''})",
               "table": str(source.path), "image_column": recipe.image_field,
               "label_column": recipe.fields[0] if recipe.role in ("class", "finding") else None,
               "label_columns": recipe.fields, "patient_column": recipe.group_field or None,
               "split_column": recipe.split_field or None, "target_name": recipe.name,
               # a part of the file names the description says is the label
               "described": source.kind == "names", "source_kind": source.kind,
               "sheet": source.name.rpartition("#")[2] if "#" in source.name else None,
               **({"channels": channels} if channels else {})}
    details.update(mask_facts)
    skipped += [f"{p}: not listed in {source.name}" for p in images  # (nor its slice folder)
                if str(p) not in listed and os.path.dirname(p) not in listed][:MAX_LISTED]
    return ScanResult(
        root=str(root), layout=LAYOUT_OF_TASK[task], task=task,
        dimension=_dimension(first, fmt), file_format=fmt, classes=classes,
        class_counts={c: counts.get(c, 0) for c in classes}, samples=samples,
        group_source=group_source(sources),
        existing_split="test" in splits and bool(splits & {"train", "val"}) and "" not in splits,
        skipped=skipped, num_files=len(images), details=details)
