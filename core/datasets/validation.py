"""Dataset validation at registration: is this folder fit to train and test a model on?

Checks, each bounded so a 100,000-image folder validates in seconds and says how much it
checked:

* every listed file exists (all of them: a stat each);
* images decode: a sample stratified by class (every class is decoded, the same share of each)
  up to ``Limits.decode`` images, read in full; the headers of up to ``Limits.headers`` more;
* segmentation masks hold only the declared values (0 = background, 1..N = the labels, N =
  len(labels)), match their image's geometry (size; spacing within a relative tolerance), and
  every declared label appears in some mask;
* exact duplicates: files of the same size are hashed (up to ``Limits.hashed`` files); an image
  repeated under two labels is an error, under two patients a warning (it would leak);
* patients counted per class; a class with too few patients for a patient-grouped split is an
  error (fewer than 2) or a warning (fewer than 5); the split the index would use is previewed.

Images are read by core.datasets.image_geometry (the field's libraries, falling back to the
templates' reader, so what validates is what training can read). Nothing is written.

A sample with one mask file per structure (core.datasets.label_maps) has a few of its files
decoded: each holds one foreground value at most and lies on its image's grid. A sample whose
mask is a drawn annotation (core.datasets.drawn_label_maps) has it drawn on its image's grid.

May import: core.datasets.image_geometry, core.datasets.label_maps,
core.datasets.drawn_label_maps, core.datasets.duplicates, core.datasets.splitting,
core.datasets.layouts.types, core.imaging.image_io.
"""
from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field

from core.datasets.image_geometry import (Unreadable, distinct_values, geometry_error, read_ref,
                                          ref_exists, sample_refs)
from core.datasets.drawn_label_maps import check_drawing, is_drawn_sample
from core.datasets.duplicates import exact_duplicates
from core.datasets.label_maps import check_structures, is_structure_sample, label_files
from core.datasets.layouts import links
from core.datasets.layouts.types import Sample, ScanResult
from core.datasets.splitting import (NO_LABEL, IndexBuildError, preview_split, sample_key,
                                     split_samples)

MIN_PATIENTS_ERROR = 2     # a class needs one patient for training and one for testing
MIN_PATIENTS_WARNING = 5   # fewer test patients than this give a meaningless test estimate
GEOMETRY_SKIP = "differs from image shape"  # how the scan notes a case it left out for this


@dataclass(frozen=True)
class Limits:
    decode: int = 2000          # images (and their masks) decoded in full
    headers: int = 20000        # further images whose header is read
    hashed: int = 5000          # files hashed for duplicates (only files sharing a size)
    seconds: float = 120.0      # decoding stops after this long (the report says so)


@dataclass
class Validation:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    checked: dict = field(default_factory=dict)
    counts: dict = field(default_factory=dict)
    split_preview: dict | None = None

    def to_json(self) -> dict:
        return asdict(self)



def _resamplable(geometries: list) -> bool:
    """Volumes on other grids (sequences of one exam: other voxel sizes), which the image
    reader resamples onto the first one's grid in world coordinates (core.imaging.image_io);
    not a volume with the first's voxel size and another shape (cut short)."""
    first = geometries[0]
    if not all(g.spacing and len(g.size) == 3 and len(g.spacing) == 3 for g in geometries):
        return False
    return all(g.size == first.size or any(abs(a - b) > 1e-3 * max(abs(b), 1e-6)
                                           for a, b in zip(g.spacing, first.spacing))
               for g in geometries[1:])

def _reads_on_one_grid(sample: Sample) -> bool:
    """Whether the image reader puts the sample's channels on one grid (series of one exam in
    other orientations: axial FLAIR beside sagittal T1w, resampled by their affines)."""
    if not isinstance(sample.image, list):
        return False
    try:
        from core.imaging.image_io import read_image
        read_image(sample.image)
        return True
    except Exception:   # noqa: BLE001 - any failure: the channels do not go together
        return False


def stratified_order(samples: list[Sample], limit: int) -> list[Sample]:
    """Up to ``limit`` samples, the same number from every class where it has them (spread
    evenly through each class's sorted list), interleaved class by class: deterministic."""
    by_class: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        by_class[s.label].append(s)
    classes = sorted(by_class, key=lambda c: (len(by_class[c]), c))
    quota, left = {}, limit
    for i, label in enumerate(classes):  # water-filling: small classes are decoded whole
        quota[label] = min(len(by_class[label]), left // (len(classes) - i))
        left -= quota[label]
    picks = {}
    for label in sorted(by_class):
        members = sorted(by_class[label], key=sample_key)
        n, q = len(members), quota[label]
        picks[label] = [members[i * n // q] for i in range(q)] if q else []
    out = []
    for i in range(max((len(p) for p in picks.values()), default=0)):
        out.extend(p[i] for _, p in sorted(picks.items()) if i < len(p))
    return out


class _Collector:
    """Problems of one kind, counted, with the first few places they occur."""

    def __init__(self) -> None:
        self.items: dict[str, list[str]] = defaultdict(list)

    def add(self, kind: str, where: str) -> None:
        self.items[kind].append(where)

    def count(self, kind: str) -> int:
        return len(self.items.get(kind, []))

    def examples(self, kind: str, n: int = 3) -> str:
        found = self.items.get(kind, [])
        more = f" (and {len(found) - n} more)" if len(found) > n else ""
        return "; ".join(found[:n]) + more


def _structure(scan: ScanResult, samples: list[Sample], v: Validation) -> None:
    """Classes, sample counts and patients per class; errors a split cannot get past."""
    multi = any(s.labels is not None for s in samples)
    images: Counter = Counter()
    patients: dict[str, set[str]] = defaultdict(set)
    for s in samples:
        for label in (s.label_list() if multi else [s.label]) or [NO_LABEL]:
            images[label] += 1
            patients[label].add(s.group)
    v.counts = {"samples": len(samples), "patients": len({s.group for s in samples}),
                "grouping_key": scan.group_source,
                "classes": {c: {"images": images[c], "patients": len(patients[c])}
                            for c in sorted(images)}}
    if scan.task == "diagnosis":
        if len(scan.classes) < 2:
            v.errors.append(f"only one class found ({', '.join(scan.classes) or 'none'}) in "
                            f"{scan.root}; diagnosis needs at least two: add a folder (or "
                            "label) for each class")
        for label in scan.classes:
            n_img, n_pat = images.get(label, 0), len(patients.get(label, ()))
            if n_img < 2:
                v.errors.append(f"class {label!r} has {n_img} image; each class needs at "
                                "least 2 (one for training, one for testing)")
            elif n_pat < MIN_PATIENTS_ERROR and not scan.existing_split:
                example = next(iter(patients[label]))
                v.errors.append(f"class {label!r}: all {n_img} images come from one patient "
                                f"({example}); a patient-grouped split needs at least "
                                f"{MIN_PATIENTS_ERROR} patients per class. Add patients of "
                                "this class or leave the class out")
            elif n_pat < MIN_PATIENTS_WARNING:
                v.warnings.append(f"class {label!r} has only {n_pat} patients; its test "
                                  "results will rest on one or two patients")
        if scan.existing_split:
            train_labels = {lbl for s in samples if s.split in ("train", "val")
                            for lbl in ((s.label_list() if multi else [s.label]) or [NO_LABEL])}
            missing = [c for c in scan.classes if c not in train_labels]
            if missing:
                v.errors.append(f"the dataset's own training folder has no image of "
                                f"{', '.join(missing)}; every class must be in training")
        counts = sorted(scan.class_counts.values())
        if counts and counts[0] * 5 < counts[-1]:
            v.warnings.append(f"classes are imbalanced ({dict(scan.class_counts)}); training "
                              "weights classes to compensate")
    else:
        if len(samples) < 4:
            v.errors.append(f"only {len(samples)} cases found in {scan.root}; at least 4 are "
                            "needed to train and test")
        elif v.counts["patients"] < MIN_PATIENTS_ERROR and not scan.existing_split:
            v.errors.append(f"all {len(samples)} cases come from one patient "
                            f"({samples[0].group}); a patient-grouped split needs at least 2")
    if scan.group_source.startswith("none"):
        v.warnings.append("no patient ID found (no patient column, no patient prefix in file "
                          "names); the split treats every image as its own patient")
    misfit = [entry for entry in scan.skipped if GEOMETRY_SKIP in entry]
    if misfit:  # the scan left these cases out; registering would silently lose them
        more = f" (and {len(misfit) - 3} more)" if len(misfit) > 3 else ""
        v.errors.append(f"{len(misfit)} masks do not match their image's geometry: "
                        f"{'; '.join(misfit[:3])}{more}. A mask must have its image's size "
                        "and spacing")
    others = [entry for entry in scan.skipped if GEOMETRY_SKIP not in entry]
    if others:
        v.warnings.append(f"{len(others)} entries ignored, e.g. {others[0]}")
    if scan.details.get("skipped_links"):  # loops, dangling links, links out of the folder
        v.warnings.append(links.describe(scan.details["skipped_links"], scan.root))


def _files(scan: ScanResult, samples: list[Sample], v: Validation, limits: Limits,
           allow_pickle: bool) -> None:
    """Existence of every file; decoding and headers (bounded); masks against their images."""
    problems = _Collector()
    missing = [r for s in samples for r in sample_refs(s) + label_files(s) if not ref_exists(r)]
    num_files = sum(len(sample_refs(s)) + len(label_files(s)) for s in samples)
    if missing:
        v.errors.append(f"{len(missing)} listed files do not exist, e.g. {missing[0]}. Check the "
                        "folder is complete and readable")
    missing_set = set(missing)
    declared = len(scan.classes) if scan.task != "diagnosis" else 0
    is_seg = any(s.extra.get("label_path") or is_drawn_sample(s) for s in samples)
    seen_values: set[int] = set()
    decoded = headers = masks = 0
    stopped = False
    started = time.monotonic()
    order = stratified_order(samples, limits.decode)
    chosen = {id(s) for s in order}
    for sample in order:
        if time.monotonic() - started > limits.seconds:
            stopped = True
            break
        refs = [r for r in sample_refs(sample) if r not in missing_set]
        geometries = []
        for ref in refs:
            try:
                geometry, _ = read_ref(ref, True, allow_pickle)
                geometries.append(geometry)
            except Unreadable as exc:
                problems.add("decode", f"{ref} ({exc})")
        decoded += 1
        sizes = [tuple(g.size) for g in geometries if g]
        if len(set(sizes)) > 1:   # volumes on other grids are resampled onto the first's
            kind = "resampled" if _resamplable([g for g in geometries if g]) or \
                _reads_on_one_grid(sample) else "channels"
            problems.add(kind, f"{sample_key(sample)} {[list(z) for z in sizes]}")
        if is_structure_sample(sample):
            if not set(label_files(sample)) & missing_set:
                found, seen, count = check_structures(sample, scan.classes,
                                                      geometries[0] if geometries else None)
                for kind, where in found:
                    problems.add(kind, f"{where} ({refs[0]})" if kind == "geometry" else where)
                seen_values.update(seen)
                masks += count
            continue
        if is_drawn_sample(sample):
            if geometries and geometries[0]:
                found, seen, count = check_drawing(sample, scan.classes, geometries[0])
                for kind, where in found:
                    problems.add(kind, where)
                seen_values.update(seen)
                masks += count
            continue
        label_path = str(sample.extra.get("label_path") or "")
        if not label_path or label_path in missing_set:
            continue
        try:
            mask_geometry, array = read_ref(label_path, True, allow_pickle)
        except Unreadable as exc:
            problems.add("decode", f"{label_path} ({exc})")
            continue
        masks += 1
        values, whole = distinct_values(array) if array is not None else ([], True)
        stored = list(sample.extra.get("label_values") or scan.details.get("label_values")
                      or range(1, declared + 1))
        bad = [x for x in values if not whole or (x != 0 and x not in stored)]
        if bad:
            problems.add("values", f"{label_path} holds {bad[:5]}")
        seen_values.update(stored.index(x) + 1 for x in values if whole and x in stored)
        if geometries and geometries[0] and mask_geometry:
            if (why := geometry_error(geometries[0], mask_geometry)):
                problems.add("geometry", f"{label_path}: {why} ({refs[0]})")
    for sample in samples:  # headers of more images (and masks) than were decoded
        if headers >= limits.headers:
            break
        if id(sample) in chosen:
            continue
        refs = [r for r in sample_refs(sample) if r not in missing_set]
        label_path = (label_files(sample) or [""])[0]   # a structure mask: its first file
        geometry = None
        for ref in refs + ([label_path] if label_path and label_path not in missing_set else []):
            try:
                found, _ = read_ref(ref, False, allow_pickle)
            except Unreadable as exc:
                problems.add("decode", f"{ref} ({exc})")
                continue
            if ref == label_path and geometry and found:
                if (why := geometry_error(geometry, found)):
                    problems.add("geometry", f"{label_path}: {why} ({refs[0]})")
            elif geometry is None:
                geometry = found
        headers += 1
    if problems.count("decode"):
        v.errors.append(f"{problems.count('decode')} files cannot be read as images, e.g. "
                        f"{problems.examples('decode')}. Remove or replace them")
    if problems.count("channels"):
        v.errors.append(f"{problems.count('channels')} cases have channel files of different "
                        f"sizes: {problems.examples('channels')}")
    if problems.count("resampled"):
        v.warnings.append(f"{problems.count('resampled')} cases have sequences on different "
                          "grids (e.g. ADC and high b-value coarser than T2); each is resampled "
                          f"onto its first channel's grid when read: {problems.examples('resampled')}")
    if problems.count("values"):
        names = ", ".join(f"{i + 1} = {n}" for i, n in enumerate(scan.classes[:10]))
        v.errors.append(f"{problems.count('values')} masks hold values not declared by the "
                        f"dataset's labels (allowed: 0 = background, {names}): "
                        f"{problems.examples('values')}. Save masks with one whole number per "
                        "label, or declare every label in labels.json")
    if problems.count("structure_values"):
        v.errors.append(f"{problems.count('structure_values')} structure masks hold more than "
                        f"one foreground value: {problems.examples('structure_values')}. Each "
                        "structure's file must be binary (0 and one value)")
    if problems.count("drawing"):
        v.errors.append(f"{problems.count('drawing')} drawn annotations cannot be drawn on "
                        f"their images: {problems.examples('drawing')}")
    if problems.count("geometry"):
        v.errors.append(f"{problems.count('geometry')} masks do not match their image's "
                        f"geometry: {problems.examples('geometry')}. A mask must have its "
                        "image's size and spacing")
    if is_seg and masks and declared:
        absent = [f"{i} ({name})" for i, name in enumerate(scan.classes, start=1)
                  if i not in seen_values]
        all_masks = masks >= sum(bool(s.extra.get("label_path")) or is_drawn_sample(s)
                                 for s in samples)
        if absent and all_masks:
            v.errors.append(f"declared labels never appear in any mask: {', '.join(absent)}; "
                            "fix labels.json or the masks")
        elif absent:
            v.warnings.append(f"declared labels not seen in the {masks} masks checked: "
                              f"{', '.join(absent)}")
    total = len(samples)
    v.checked.update({
        "samples": total, "files": num_files, "files_missing": len(missing),
        "decoded": decoded, "masks_decoded": masks, "headers_read": headers,
        "only_existence_checked": max(0, total - decoded - headers),
        "decode_limit": limits.decode, "header_limit": limits.headers,
        "stopped_after_seconds": limits.seconds if stopped else None,
        "how": f"{decoded} of {total} images decoded in full (a sample stratified by class)"
               + (f", headers of {headers} more read" if headers else "")
               + (f", {total - decoded - headers} only checked to exist"
                  if total - decoded - headers > 0 else "")})
    if stopped:
        v.warnings.append(f"decoding stopped after {limits.seconds:.0f} s: {decoded} of "
                          f"{total} images decoded")


def _duplicates(scan: ScanResult, samples: list[Sample], v: Validation, limits: Limits) -> None:
    """Exact duplicates among image files (core.datasets.duplicates), reported."""
    dups, n_candidates, hashed = exact_duplicates(samples, limits.hashed)
    cross_label = [g for g in dups if scan.task == "diagnosis" and
                   len({tuple(sorted(s.label_list())) for s in g}) > 1]
    cross_patient = [g for g in dups if len({s.group for s in g}) > 1]
    if cross_label:
        g = cross_label[0]
        v.errors.append(f"{len(cross_label)} identical images carry different labels, e.g. "
                        f"{g[0].image} ({', '.join(g[0].label_list()) or NO_LABEL}) and "
                        f"{g[1].image} ({', '.join(g[1].label_list()) or NO_LABEL}). Remove "
                        "the wrong copy")
    elif cross_patient:
        g = cross_patient[0]
        v.warnings.append(f"{len(cross_patient)} identical images belong to different "
                          f"patients, e.g. {g[0].image} ({g[0].group}) and {g[1].image} "
                          f"({g[1].group}); a copy could end up on both sides of the split")
    elif dups:
        v.warnings.append(f"{len(dups)} images have exact duplicates, e.g. {dups[0][0].image}")
    v.checked.update({"duplicate_candidates": n_candidates, "hashed": hashed,
                      "duplicate_sets": len(dups)})


def validate(scan: ScanResult, description: str = "", limits: Limits = Limits(),
             allow_pickle: bool = False) -> Validation:
    """Validate a scanned dataset (see the module docstring). Read-only."""
    v = Validation()
    samples = split_samples(scan)
    _structure(scan, samples, v)
    _files(scan, samples, v, limits, allow_pickle)
    _duplicates(scan, samples, v, limits)
    if not v.errors:
        try:
            v.split_preview = preview_split(scan, description)
        except IndexBuildError as exc:
            v.errors.append(f"the split cannot be made: {exc}")
        else:
            sides = v.split_preview["num_images"]
            if not sides["train"] or not sides["test"]:
                v.errors.append(f"the split would leave {sides['train']} training and "
                                f"{sides['test']} test images; relax the caps in the "
                                "description or add patients")
    return v
