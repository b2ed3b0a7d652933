"""The records reading of a dataset folder: its record sources, their targets, each target
applied (one ScanResult per target, its recipe in ``details["recipe"]``), or one recipe the
user gave applied as it is. Of a label table's diagnosis targets, the one a reader would pick
(core.datasets.records.targets' reading order) is marked ``details["preferred"]`` — and
``details["described"]`` when the description names its field as the label — for the
interpretation step's scoring.

May import: core.datasets.layouts (types, inventory, label_table_ids, mask_labels, arrays),
core.datasets.records.
"""
from __future__ import annotations

from pathlib import Path

from core.datasets.layouts.arrays import add_array_facts, per_sample_arrays
from core.datasets.layouts.inventory import take_inventory
from core.datasets.layouts.label_table_ids import IdMatcher
from core.datasets.layouts.mask_labels import label_names
from core.datasets.layouts.types import ScanError, ScanResult, all_images
from core.datasets.records.names import name_sources
from core.datasets.records.recipe import Recipe, RecipeError, apply_recipe
from core.datasets.records.sidecars import sidecar_source
from core.datasets.records.sources import Source, find_sources
from core.datasets.records.targets import described_field, source_targets

MAX_TARGETS = 40
TABLE_SUFFIXES = (".csv", ".tsv", ".xlsx", ".xlsm", ".xls", ".json", ".jsonl")  # label tables


def target_id(recipe: Recipe) -> str:
    """A target's name on the card and in a plan: the source and the field(s)."""
    what = recipe.name or ", ".join(recipe.fields)
    return f"{recipe.source} :: {what}"


def _context(root: Path, description: str = ""):
    """(images, sources, problems, every image file): masks are not images; per-sample array
    volumes (ADNI's ``.pt``, KneeMRI's ``.pck``) are the images of a folder made of them; the
    file names are a source too when the description says a part of them is a label."""
    files = all_images(root)
    inv = take_inventory(root)
    files = per_sample_arrays(inv.files("array"), len(files)) or files
    masks = {str(p) for p in inv.files("segmentation")}
    images = [p for p in files if str(p) not in masks] or files
    sidecars, read = sidecar_source(root, inv)
    sources, problems = find_sources(root, inv, read)
    sources += [sidecars] if sidecars else []
    return images, sources + name_sources(root, images, description), problems, files


def _mask_names(root: Path, description: str):
    return lambda masks: label_names(root, description, masks)


def read_targets(root: Path, description: str = "") -> list[ScanResult]:
    """One ScanResult per target the folder's record sources offer (none: [])."""
    images, sources, problems, files = _context(root, description)
    if not images or not sources:
        return []
    matcher, every = IdMatcher(images, root), IdMatcher(files, root)
    out: list[ScanResult] = []
    for source in sources:
        recipes = source_targets(source, images, root, matcher, description, every)
        described, chosen = described_field(recipes, description), False
        for recipe in recipes:
            try:
                scan = apply_recipe(root, recipe, source, images, matcher,
                                    _mask_names(root, description), every)
            except ScanError:
                continue
            scan.details["target"] = target_id(recipe)
            scan.details["source_problems"] = problems[:10]
            add_array_facts(scan, description)
            if recipe.task == "diagnosis" and not chosen and \
                    source.path.suffix.lower() in TABLE_SUFFIXES:
                # the label a reader of this table would pick (targets' reading order)
                chosen = scan.details["preferred"] = True
                scan.details["described"] = recipe.fields == [described]
            out.append(scan)
            if len(out) >= MAX_TARGETS:
                return out
    return out


def named_source(sources: list[Source], name: str) -> Source | None:
    """The source a recipe names: by its name, else one sharing a file with it (a recipe
    written before ``train.csv`` and ``test.csv`` were read as one source)."""
    wanted = {s.strip() for s in name.split(" + ")}
    return next((s for s in sources if s.name == name), None) or next(
        (s for s in sources if {n.strip() for n in s.name.split(" + ")} & wanted), None)


def folder_sources(root: Path, description: str = "") -> list[Source]:
    """Every record source of the folder (read-only), the file names included when the
    description says a part of them is a label."""
    return _context(root, description)[1]


def scan_with_recipe(root: Path, recipe: Recipe, description: str = "") -> ScanResult:
    """The folder read by ``recipe`` (ScanError naming what does not fit)."""
    images, sources, _problems, files = _context(root, description)
    source = named_source(sources, recipe.source)
    if source is None:
        names = ", ".join(s.name for s in sources[:8]) or "none"
        raise ScanError(f"the recipe's source {recipe.source!r} is not in {root} (sources "
                        f"found: {names}); edit the recipe's source")
    missing = [f for f in [recipe.image_field, *recipe.fields] if f and f not in source.fields]
    if missing:
        raise ScanError(f"the recipe names field(s) {', '.join(missing)} that {source.name} "
                        f"does not have (its fields: {', '.join(source.fields[:20])})")
    scan = apply_recipe(root, recipe, source, images, IdMatcher(images, root),
                        _mask_names(root, description), IdMatcher(files, root))
    scan.details["target"] = target_id(recipe)
    return add_array_facts(scan, description)


def source_fields(root: Path, description: str = "") -> list[dict]:
    """Every source's fields with their roles (what the mapping form lists)."""
    from core.datasets.records.fields import profile
    _images, sources, _problems, _files = _context(root, description)
    return [{"source": s.name, "kind": s.kind, "records": len(s.records),
             "fields": [i.to_json() for i in profile(s.records).values()]} for s in sources]


__all__ = ["read_targets", "scan_with_recipe", "source_fields", "target_id", "named_source",
           "folder_sources", "Recipe", "RecipeError", "Source"]
