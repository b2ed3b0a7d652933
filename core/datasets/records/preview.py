"""A recipe as a mapping form and its live preview, for the Datasets page: the fields of the
recipe's record source with the part each plays in the recipe, the value map as rows (raw value,
how many rows hold it, what it reads as), a recipe rebuilt from the roles the user gave each
field, and what the folder reads as by a recipe — example rows (file, label, patient, split),
coverage and class counts, or the problem in words.

Nothing here writes: the preview reads the folder the way ``crew register --recipe`` does
(core.datasets.layouts.dispatch.scan_folder with a recipe, then core.datasets.records.recipe's
apply_recipe) and saving stays core.datasets.registration.register_dataset's.

May import: core.datasets.layouts (dispatch, inventory, types), core.datasets.records.
"""
from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from core.datasets.layouts.dispatch import scan_folder
from core.datasets.layouts.types import ScanError
from core.datasets.records.fields import binary_value, profile, split_labels
from core.datasets.records.recipe import ROLES, Recipe, RecipeError
from core.datasets.records.reading import folder_sources, named_source
from core.datasets.records.sources import Source

# the part a field plays in a recipe: "" unused, the image / group / split field, or a target
FIELD_ROLES = {
    "": "not used",
    "image": "names the images",
    "group": "patient / group",
    "split": "split (train / val / test)",
    "class": "target: class (one categorical field)",
    "finding": "target: finding (1 / 0 / -1 / blank)",
    "findings": "target: findings (several binary fields)",
    "labels": "target: several labels in one field",
    "mask": "target: mask file (segmentation)",
    "annotations": "target: boxes (COCO-like)",
    "report": "target: report text (findings, impression)",
}
SINGLE_FIELD = ("class", "finding", "labels", "mask", "annotations")
FINDING_KINDS = ("pos", "neg", "uncertain", "blank")
KIND_TEXT = {"pos": "1 / yes / positive", "neg": "0 / no / negative",
             "uncertain": "-1 / uncertain", "blank": "blank (not mentioned)"}
MAX_VALUES = 200
MAX_EXAMPLES = 12


def recipe_source(root: str | os.PathLike, recipe: dict, description: str = "") -> Source:
    """The record source a recipe names (its records, read-only); RecipeError when the folder
    has no such source."""
    root = Path(root).expanduser().resolve()
    sources = folder_sources(root, description)
    name = str((recipe or {}).get("source") or "")
    source = named_source(sources, name)
    if source is None:
        found = ", ".join(s.name for s in sources[:8]) or "none"
        raise RecipeError(f"the recipe's source {name!r} is not in {root} (sources found: "
                          f"{found})")
    return source


def field_roles(recipe: dict) -> dict[str, str]:
    """Each field the recipe uses and its part (FIELD_ROLES keys); the image field shows as
    such when it also groups (recipe_from_roles keeps that grouping)."""
    roles: dict[str, str] = {}
    for f in recipe.get("fields") or []:
        roles[f] = recipe.get("role", "")
    for key, part in (("group_field", "group"), ("split_field", "split"),
                      ("image_field", "image")):
        if recipe.get(key):
            roles[recipe[key]] = part
    return roles


def form_fields(source: Source, recipe: dict) -> list[dict]:
    """The mapping form's rows: every field of the source with what it looks like (its typed
    role, a few values) and its part in the recipe."""
    parts = field_roles(recipe)
    infos = profile(source.records)
    return [{"name": name, "kind": info.role, "filled": info.filled,
             "examples": info.examples[:3], "part": parts.get(name, "")}
            for name, info in infos.items()]


def default_values(role: str, fields: list[str], name: str = "") -> dict[str, str | None]:
    """The value map a new target starts with (as core.datasets.records.targets drafts it)."""
    if role == "finding":
        finding = name or fields[0]
        return {"pos": finding, "neg": f"no {finding}", "uncertain": None, "blank": None}
    if role == "findings":
        return {f: f for f in fields}
    return {}


def recipe_from_roles(base: dict, parts: dict[str, str], values: dict | None = None,
                      name: str | None = None, match: str | None = None) -> dict:
    """The recipe (JSON) the form's field parts make, from ``base`` (the recipe being edited):
    one image field, one target role over its field(s), at most one group and one split field.
    ``values`` is the edited value map; without it the base's map while the target role and
    fields are the base's, else default_values (as ``name``: the base's, else the field's).
    RecipeError says what to change."""
    chosen = {f: p for f, p in parts.items() if p}
    unknown = sorted({p for p in chosen.values() if p not in FIELD_ROLES})
    if unknown:
        raise RecipeError(f"unknown field role(s) {', '.join(unknown)}; use one of "
                          f"{', '.join(k for k in FIELD_ROLES if k)}")

    def having(part: str) -> list[str]:
        return [f for f, p in chosen.items() if p == part]

    images = having("image")
    if len(images) != 1:
        raise RecipeError("choose exactly one field that names the images (now: "
                          f"{', '.join(images) or 'none'})")
    for part in ("group", "split"):
        if len(having(part)) > 1:
            raise RecipeError(f"only one field can be the {FIELD_ROLES[part]} field (now: "
                              f"{', '.join(having(part))}); set the others to 'not used'")
    targets = {f: p for f, p in chosen.items() if p in ROLES}
    if not targets:
        raise RecipeError("give one field a target role (class, finding, findings, labels, "
                          "mask, boxes or report): that is what the model learns")
    roles = sorted(set(targets.values()))
    if len(roles) > 1:
        which = ", ".join(f"{f} is {p}" for f, p in targets.items())
        raise RecipeError(f"the target fields have different roles ({which}); a recipe reads "
                          "one target: give them the same role or set the others to "
                          "'not used'")
    role, fields = roles[0], list(targets)
    if role in SINGLE_FIELD and len(fields) > 1:
        hint = "; for several binary findings use 'findings'" if role == "finding" else ""
        raise RecipeError(f"the role {role} reads one field, and {', '.join(fields)} have it: "
                          f"keep one{hint}")
    if role == "report" and len(fields) > 2:
        raise RecipeError(f"a report reads at most two text fields (findings, impression); "
                          f"now {', '.join(fields)}")
    kept = [f for f in base.get("fields") or [] if f in fields]   # the base's order first
    fields = kept + [f for f in fields if f not in kept]           # (findings, impression)
    same = role == base.get("role") and set(fields) == set(base.get("fields") or [])
    if name is None:
        name = base.get("name", "") if same else fields[0] if role in (
            "class", "finding", "labels", "mask") else {"findings": "findings",
                                                        "annotations": "boxes"}.get(role, role)
    if values is None:
        values = dict(base.get("values") or {}) if same else default_values(role, fields, name)
    # an id field that names a patient's images also groups them (targets._group_field)
    group_by_image = images[0] if base.get("group_field") == images[0] else ""
    data = {"source": base.get("source", ""), "image_field": images[0], "role": role,
            "fields": fields, "match": match or base.get("match", "path"), "values": values,
            "group_field": (having("group") or [group_by_image])[0],
            "split_field": (having("split") or [""])[0], "name": name}
    return Recipe.from_json(data).to_json()


def value_rows(source: Source, recipe: dict) -> list[dict]:
    """The value map as rows: {"value", "rows", "reads_as"} (reads_as None: left out). A
    finding's values are its kinds (pos, neg, uncertain, blank); several findings list their
    fields; masks and reports have no value map ([])."""
    role, fields = recipe.get("role"), list(recipe.get("fields") or [])
    values = recipe.get("values") or {}
    records = source.records
    if not fields or role in ("mask", "report"):
        return []
    if role == "finding":
        counts = Counter(binary_value(r.get(fields[0], "")) for r in records)
        return [{"value": k, "meaning": KIND_TEXT[k], "rows": counts.get(k, 0),
                 "reads_as": values.get(k)} for k in FINDING_KINDS]
    if role == "findings":
        return [{"value": f, "meaning": "field", "rows": sum(
            binary_value(r.get(f, "")) == "pos" for r in records),
            "reads_as": values.get(f, f)} for f in fields]
    counts: Counter = Counter()
    for r in records:
        if role == "class":
            raw = str(r.get(fields[0], "")).strip()
            if raw:
                counts[raw] += 1
        elif role == "labels":
            counts.update(split_labels(r.get(fields[0], "")))
        elif role == "annotations":
            for ann in r.get(fields[0]) or []:
                if isinstance(ann, dict):
                    counts[str(ann.get("category", ann.get("category_id", "lesion")))] += 1
    return [{"value": v, "meaning": "value", "rows": n, "reads_as": values.get(v, v)}
            for v, n in counts.most_common(MAX_VALUES)]


def values_of_rows(rows: list[dict]) -> dict[str, str | None]:
    """The value map the edited rows give ("reads_as" empty: left out)."""
    out: dict[str, str | None] = {}
    for row in rows:
        reads = row.get("reads_as")
        reads = None if reads is None or str(reads).strip() in ("", "nan", "None") \
            else str(reads).strip()
        out[str(row["value"])] = reads
    return out


def _hint(source: Source, recipe: Recipe) -> str:
    """Why a target field may read nothing: what its values look like."""
    infos = profile(source.records)
    notes = []
    for f in recipe.fields:
        info = infos.get(f)
        if info is None:
            continue
        if recipe.role == "finding" and info.role != "finding":
            notes.append(f"{f} holds {', '.join(info.examples[:3]) or 'no values'}, not "
                         "1/0/-1 values: use role class for it")
        elif recipe.role in ("mask", "annotations") and info.role != recipe.role:
            notes.append(f"{f} holds {', '.join(info.examples[:3]) or 'no values'}, which "
                         f"is no {'mask file' if recipe.role == 'mask' else 'box list'}")
    if recipe.role == "finding" and recipe.values and not any(recipe.values.values()):
        notes.append("every value of the finding is left out: give pos or neg a class")
    return ("; " + "; ".join(notes)) if notes else ""


def preview_recipe(root: str | os.PathLike, recipe: dict, description: str = "",
                   examples: int = MAX_EXAMPLES) -> dict:
    """What ``root`` reads as by ``recipe`` (JSON), without writing anything: {"ok", "error",
    "task", "classes", "class_counts", "num_samples", "num_images", "coverage", "patients",
    "grouping", "split", "examples": [{"file", "label", "patient", "split"}], "notes",
    "recipe"}. On a problem "ok" is False and "error" names it."""
    out = {"ok": False, "error": "", "task": None, "classes": [], "class_counts": {},
           "num_samples": 0, "num_images": 0, "coverage": 0.0, "patients": 0, "grouping": "",
           "split": "", "examples": [], "notes": [], "recipe": None}
    try:
        parsed = Recipe.from_json(recipe)
        out["recipe"] = parsed.to_json()
        scan = scan_folder(root, description, recipe=parsed)
    except (RecipeError, ScanError) as exc:
        message = str(exc)
        if out["recipe"] and "names no image" in message:
            try:
                message += _hint(recipe_source(root, recipe, description), parsed)
            except RecipeError:
                pass
        out["error"] = message
        return out
    base = Path(scan.root)
    rows = []
    for s in scan.samples[:examples]:
        image = s.image[0] if isinstance(s.image, list) else s.image
        if s.extra.get("label_path"):
            label = "mask " + os.path.relpath(s.extra["label_path"], base)
        elif "boxes" in s.extra:
            label = f"{len(s.extra['boxes'])} box(es) {', '.join(sorted(set(s.extra['labels'])))}"
        elif "findings" in s.extra or "impression" in s.extra:
            label = "report: " + (s.extra.get("findings") or s.extra.get("impression") or "")[:80]
        else:
            label = ", ".join(s.label_list()) or "(no label)"
        rows.append({"file": os.path.relpath(str(image).split("::")[0], base), "label": label,
                     "patient": s.group, "split": s.split or "(made here)"})
    images = max(1, scan.num_files)
    out.update(ok=True, task=scan.task, classes=list(scan.classes),
               class_counts=dict(scan.class_counts), num_samples=len(scan.samples),
               num_images=scan.num_files, coverage=round(len(scan.samples) / images, 3),
               patients=len({s.group for s in scan.samples}), grouping=scan.group_source,
               split="kept from the dataset" if scan.existing_split else "made at training",
               examples=rows, notes=[x for x in scan.skipped if "name no image" in x
                                     or "conflicting" in x][:5])
    return out


__all__ = ["FIELD_ROLES", "default_values", "field_roles", "form_fields", "preview_recipe",
           "recipe_from_roles", "recipe_source", "value_rows", "values_of_rows"]
