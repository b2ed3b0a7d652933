"""Read-only scan of a dataset folder: which files, which task, which labels, which patients.

This is the Data Engineer's eyes and the registration form's first draft. It never writes and
never decodes more than a few images. It takes an inventory of the folder
(core.datasets.layouts.inventory), reads the datacard description's hints
(core.datasets.layouts.hints), asks every reader for its reading of the folder
(core.datasets.layouts.readers) and keeps the best-scored acceptable one
(core.datasets.layouts.interpret), then infers the patient key where the reading found no
reliable one (core.datasets.patient_keys). ``details["interpretation"]`` says which reading won and
whether the call was close enough to ask the user; ``details["interpretations"]`` lists the
readings considered (with a few example rows each) for the Datasets page and the CLI.
Symlinks that loop, dangle or lead out of the folder are skipped (core.datasets.layouts.links);
``details["skipped_links"]`` names them with the reason.
"""
from __future__ import annotations

import os
from pathlib import Path

from core.datasets.layouts import links
from core.datasets.layouts.hints import read_hints
from core.datasets.layouts.interpret import choose, read_all
from core.datasets.layouts.inventory import stem_of_name
from core.datasets.layouts.types import (ScanError, ScanResult, all_images, shared_walks,
                                         use_mask_affixes)
from core.datasets.patient_keys import infer_patient_keys

def confirmed_mask_affixes(root: Path, candidates: list[str]) -> tuple[str, ...]:
    """The endings a description gives the masks that the folder bears out: some image file's
    stem ends with one and, without it, is the stem of another image file (``X_les.png`` beside
    ``X.png``). An ending no such pair bears out (``_T1`` on every scan) is dropped: ``_roi``
    or ``_outline`` files are masks only where the description says so and pairs confirm it
    (elsewhere they may be cropped images). Uses the scan's shared image walk."""
    if not candidates:
        return ()
    stems = {stem_of_name(p.name).lower() for p in all_images(root)}
    return tuple(a for a in candidates
                 if any(s.endswith(a) and s[: -len(a)] in stems for s in stems))


def patients_from_sources(scan: ScanResult, root: Path) -> ScanResult:
    from core.datasets.records.grouping import patients_from_sources as from_sources
    return from_sources(scan, root)


def _scan_recipe(root: Path, recipe, description: str) -> ScanResult:
    from core.datasets.records.reading import scan_with_recipe
    from core.datasets.records.recipe import Recipe, RecipeError
    try:
        if not isinstance(recipe, Recipe):
            recipe = Recipe.from_json(recipe)
        scan = infer_patient_keys(patients_from_sources(
            scan_with_recipe(root, recipe, description), root))
    except RecipeError as exc:
        raise ScanError(str(exc)) from exc
    reader = f"records:{scan.details['target']}"
    scan.details["interpretation"] = {
        "reader": reader, "score": None, "coverage": None, "source": scan.details["source"],
        "ambiguous": False, "why": "", "chosen_by": "recipe"}
    from core.datasets.layouts.interpret import Reading, _example_rows, source_of
    from core.datasets.layouts.target_list import target_entry
    reading = Reading(reader, scan, coverage=min(1.0, len(scan.samples) / max(1, scan.num_files)))
    scan.details["targets"] = [target_entry(reading, str(root), _example_rows, source_of)]
    skipped = links.skipped_links()
    if skipped:
        scan.details["skipped_links"] = skipped
    return scan


def scan_folder(root: str | os.PathLike, description: str = "",
                interpretation: str | int | None = None,
                declared_tasks: list[str] | None = None, recipe=None) -> ScanResult:
    """Read ``root`` (helped by the datacard's ``description`` and declared tasks) and list its
    samples. ``interpretation`` picks a reading: its number in
    ``details["interpretations"]`` or a reader name (what a datacard keeps). ``recipe`` (a
    core.datasets.records.recipe.Recipe or its JSON) reads the folder exactly as it says
    instead. Read-only. Raises ScanError with advice."""
    root_path = Path(root).expanduser()
    if not root_path.exists():
        raise ScanError(f"dataset folder {root_path} does not exist. Check the path.")
    if not root_path.is_dir():
        raise ScanError(f"{root_path} is a file, not a folder. Give the folder that holds "
                        "the dataset.")
    root_path = root_path.resolve()
    with shared_walks(), links.watching(root_path):  # links that loop or leave it: skipped
        use_mask_affixes(confirmed_mask_affixes(root_path, read_hints(description).mask_affixes))
        if recipe is not None:
            return _scan_recipe(root_path, recipe, description)
        readings, inventory = read_all(root_path, description, declared_tasks)
        scan = infer_patient_keys(patients_from_sources(
            choose(readings, root_path, interpretation), root_path))
        scan.details["inventory"] = inventory.summary()
        skipped = links.skipped_links()
        if skipped:  # registration warns with each path (core.datasets.validation)
            scan.details["skipped_links"] = skipped
        return scan
