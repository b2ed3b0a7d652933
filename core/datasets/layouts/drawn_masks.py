"""Segmentation whose masks are drawn annotations, not mask images (layout
``image_mask_folders``, ``details["drawn_masks"]``): run-length encoded masks in a table
(core.datasets.layouts.rle_tables, decoded as core.datasets.layouts.run_length decides) or
outlines in annotation files (core.datasets.layouts.polygon_files: Aperio ImageScope XML,
CVAT XML, labelme polygon JSON).

Annotations are paired with 2D images (PNG, JPEG, TIFF, BMP, single-frame DICOM) in any
folder: a table's id or a CVAT ``<image name>`` by file name, path or stem (a DICOM
SOPInstanceUID file name), a per-image file (Aperio, labelme) by its stem beside the image or
anywhere the stem is unique, or by labelme's ``imagePath``. The source pairing the most images
is the reading (``details["variant"]``: ``rle_csv``, ``aperio_xml``, ``cvat_xml``,
``labelme_json``); images it does not annotate are unlabeled and not used. An image listed
without a finding (``-1``, an empty cell, a file without regions) is a labelled sample whose
mask is empty.

Classes come from the annotation's class field (a table's class column or ``_<class>`` id
suffix, a region's label) in the order ``labels.json`` or the description lists them, else
sorted; where the annotations name none, the one foreground is what the description (or a
labels file) names (core.datasets.layouts.mask_labels.described_foreground), else
``foreground``. ``labels[i]`` is value i + 1 of the label map the index draws per case
(core.datasets.drawn_label_maps) into the job's Datapath. Each sample's ``extra["drawing"]``
says what to draw: ``format``, ``file``, the table's ``columns``, ``lines`` per class and
``encoding`` (RLE) or the image ``key`` in the file (outlines), and ``names`` (the file's
label -> class).

May import: core.datasets.layouts.common, .inventory, .mask_labels, .mask_structures,
.polygon_files, .rle_tables, .run_length, .types, core.datasets.image_geometry.
"""
from __future__ import annotations

import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from core.datasets.layouts.common import (GENERIC_DIRS, build_result, common_parent,
                                          group_for, group_source, held_out_splits,
                                          split_of_path)
from core.datasets.layouts.inventory import stem_of_name, take_inventory
from core.datasets.layouts.mask_labels import described_foreground
from core.datasets.layouts.mask_structures import ordered_labels
from core.datasets.layouts.polygon_files import (FORMAT_NAMES, DrawingError, is_area,
                                                 read_drawing)
from core.datasets.layouts.rle_tables import MAX_TABLES, read_rle_table
from core.datasets.layouts.run_length import choose_encoding, describe_encoding
from core.datasets.layouts.types import Sample, image_suffix, is_image

FLAT_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".dcm", ".dicom")
PEEK_BYTES = 65_536
ENCODING_SAMPLES = 24


class ImageKeys:
    """2D image files by lower-cased relative path, trailing path, file name and stem; a key
    several files share finds none of them."""

    def __init__(self, images: list[Path], root: Path):
        self.root = root
        self.by: dict[str, set[Path]] = defaultdict(set)
        for path in images:
            rel = path.relative_to(root).as_posix().lower()
            stem = stem_of_name(path.name).lower()
            parts = rel.split("/")
            for k in range(1, len(parts) + 1):
                self.by["/".join(parts[-k:])].add(path)
            self.by["/".join(parts[:-1] + [stem])].add(path)
            self.by[stem].add(path)

    def find(self, text: object) -> Path | None:
        t = str(text or "").strip().replace("\\", "/").lower()
        while t.startswith("./"):
            t = t[2:]
        parts = [p for p in t.split("/") if p not in ("", ".")]
        if not parts:
            return None
        keys = ["/".join(parts[-k:]) for k in range(len(parts), 0, -1)]
        if is_image(parts[-1]):   # "x.png" names the stem x; "x.png_1" names no file
            keys.append(stem_of_name(parts[-1]))
        for key in keys:
            hits = self.by.get(key)
            if hits:
                return next(iter(hits)) if len(hits) == 1 else None
        return None

    def beside(self, annotation: Path) -> Path | None:
        """The image a per-image annotation file goes with: same stem in its folder, else the
        one image of that stem anywhere."""
        stem = stem_of_name(annotation.name).lower()
        here = [p for p in self.by.get(stem, ()) if p.parent == annotation.parent]
        return here[0] if len(here) == 1 else self.find(stem)


@dataclass
class Source:
    variant: str
    where: str                                   # the files, in words
    drawings: dict = field(default_factory=dict)   # image -> extra["drawing"] (no names yet)
    labels: dict = field(default_factory=dict)     # image -> set of the file's labels
    files: set = field(default_factory=set)
    skipped: list = field(default_factory=list)
    details: dict = field(default_factory=dict)


def _rle_sources(root: Path, keys: ImageKeys, description: str) -> list[Source]:
    tables = [p for p in take_inventory(root).files("table")
              if p.name.lower().endswith((".csv", ".tsv"))]
    out = []
    for path in sorted(tables, key=lambda p: (len(p.parts), str(p)))[:MAX_TABLES]:
        table = read_rle_table(path, keys.find)
        if table is None:
            continue
        encoding = choose_encoding(list(table.runs.values()),
                                   _encoding_samples(table), description)
        rel = path.relative_to(root).as_posix()
        source = Source("rle_csv", f"run-length encoded masks in {rel} "
                                   f"({describe_encoding(encoding)})", files={path})
        for image, classes in table.images.items():
            source.drawings[image] = {"format": "rle_csv", "file": str(path),
                                      "columns": table.columns(), "encoding": encoding,
                                      "lines": {c: sorted(v) for c, v in classes.items()}}
            source.labels[image] = set(classes)
        source.skipped += [f"{rel}: id {k!r} names no image file; its rows are not used"
                           for k in table.unmatched[:200]]
        source.details = {"table": str(path), "encoding": encoding,
                          "rle_columns": table.columns(),
                          "images_without_finding": sum(not c for c in table.images.values())}
        out.append(source)
    return out


def _encoding_samples(table) -> list:
    """(runs, (rows, columns), pixels) of a few masks, each image's size from its header."""
    from core.datasets.image_geometry import Unreadable, read_ref
    out = []
    for image, classes in table.images.items():
        for lines in classes.values():
            try:
                geometry, _ = read_ref(str(image), False, False)
            except Unreadable:
                geometry = None
            if geometry is None or len(geometry.size) != 2:
                continue
            shape = (int(geometry.size[1]), int(geometry.size[0]))
            out.append(([table.runs[n] for n in lines], shape, _pixels(image)))
            break
        if len(out) >= ENCODING_SAMPLES:
            break
    return out


def _pixels(image: Path):
    def load():
        from core.datasets.image_geometry import Unreadable, read_ref
        try:
            return read_ref(str(image), True, False)[1]
        except Unreadable:
            return None
    return load


def _sniff(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            head = handle.read(PEEK_BYTES)
    except OSError:
        return ""
    if path.suffix.lower() == ".xml":
        if b"<Annotations" in head and b"<Annotation" in head.replace(b"<Annotations", b""):
            return "aperio_xml"
        if b"<annotations" in head and (b"<image" in head or b"<version" in head):
            return "cvat_xml"
    elif path.suffix.lower() == ".json" and b'"shapes"' in head:
        return "labelme_json"
    return ""


def _outline_sources(root: Path, keys: ImageKeys) -> list[Source]:
    by_format: dict[str, Source] = {}
    for path in take_inventory(root).files("annotation"):
        fmt = _sniff(path)
        if not fmt:
            continue
        try:
            found = read_drawing(path, fmt)
        except DrawingError:
            continue
        source = by_format.setdefault(fmt, Source(fmt, ""))
        for key, regions in found.items():
            image = _image_of(path, key, fmt, keys)
            rel = path.relative_to(root).as_posix()
            if image is None:
                source.skipped.append(f"{rel}: {('image ' + repr(key)) if key else 'its image'}"
                                      " is not in the folder; not used")
                continue
            areas = [r for r in regions if is_area(r)]
            if fmt == "labelme_json" and len(areas) * 2 < len(regions):
                continue   # mostly lines or points: not a drawn mask
            source.drawings[image] = {"format": fmt, "file": str(path), "key": key}
            source.labels[image] = {r.label for r in areas}
            source.files.add(path)
    for fmt, source in by_format.items():
        folders = Counter(p.parent.relative_to(root).as_posix() for p in source.files)
        shown = ", ".join(f"{f}/" if f != "." else "the top folder" for f, _ in
                          folders.most_common(3))
        source.where = f"{FORMAT_NAMES[fmt]} outlines ({len(source.files)} files in {shown})"
        source.details = {"annotation_dir": Path(folders.most_common(1)[0][0]).name
                          if folders else ""}
    return [s for s in by_format.values() if s.drawings]


def _image_of(path: Path, key: str, fmt: str, keys: ImageKeys) -> Path | None:
    if fmt == "cvat_xml":
        return keys.find(key)
    if key:   # labelme's imagePath, relative to the JSON file
        beside = (path.parent / key.replace("\\", "/"))
        found = keys.find(os.path.relpath(beside, keys.root)) if beside.is_file() else None
        return found or keys.find(key) or keys.beside(path)
    return keys.beside(path)


FILE_WORDS = re.compile(r"^(?:train(?:ing)?|test(?:ing)?|val(?:id(?:ation)?)?|stage|rle|runs?|"
                        r"encod\w*|pixels?|masks?|segm\w*|labels?|annotations?|xml|json|csv|"
                        r"data|dataset|ground|truth|gt|v\d+|\d+|all|final|new|old|files?)$",
                        re.I)


def _named_by_files(source: Source) -> tuple[str, str] | None:
    """The one class the annotation files' name or folder gives (``train_ship_segmentations
    .csv``, ``Nuclei annotations/``), once the words every such file has are dropped."""
    names = {p.stem if source.variant == "rle_csv" else p.parent.name for p in source.files}
    if len(names) != 1 or (source.variant != "rle_csv" and
                           {p.parent for p in source.drawings} & {p.parent for p in source.files}):
        return None   # outlines beside their images: the folder is the images'
    words = [w for w in re.split(r"[_\-\s.]+", names.pop())
             if w and not FILE_WORDS.match(w) and w.lower() not in GENERIC_DIRS]
    if 1 <= len(words) <= 2 and all(re.fullmatch(r"[A-Za-z]{3,}", w) for w in words):
        where = "table" if source.variant == "rle_csv" else "folder"
        return " ".join(words).lower(), f"the annotation {where}'s name"
    return None


def _names(source: Source, root: Path, description: str, skipped: list[str]
           ) -> tuple[list[str], dict[str, str], str]:
    """(classes, the files' label -> class, where the names came from)."""
    counts = Counter(label for labels in source.labels.values() for label in labels)
    named = [label for label in counts if label]
    if not named:
        found = described_foreground(description, root) or _named_by_files(source)
        name, how = found if found else ("foreground", "none named (one foreground class)")
        return [name], {"": name}, how
    if counts.get(""):
        skipped.append(f"{counts['']} images have regions without a class while others name "
                       f"theirs ({', '.join(sorted(named)[:4])}); the unnamed ones are not "
                       "drawn")
    labels, how = ordered_labels(root, description, named)
    if how.startswith("structure mask names") and all(n.isdigit() for n in named):
        labels, how = sorted(named, key=int), "class values (in numeric order)"
    elif how.startswith("structure mask names"):
        how = "class names in the annotations (sorted)"
    return labels, {n: n for n in named}, how


def scan_drawn_masks(root: Path, images: list[Path], description: str = ""):
    """ScanResult for masks drawn as runs or outlines (see the module doc), or None."""
    flat = [p for p in images if image_suffix(p.name) in FLAT_SUFFIXES]
    if not flat:
        return None
    keys = ImageKeys(flat, root)
    sources = _rle_sources(root, keys, description) + _outline_sources(root, keys)
    if not sources:
        return None
    source = max(sources, key=lambda s: len(s.drawings))
    if len(source.drawings) < 2:
        return None
    skipped = list(source.skipped)
    labels, names, how = _names(source, root, description, skipped)
    cases = sorted(source.drawings)
    unlabeled = [p for p in flat if p not in source.drawings]
    skipped += [f"{p}: no drawn annotation for it; unlabeled, not used" for p in unlabeled]
    mapping = held_out_splits([split_of_path(p, root) for p in cases])
    base = common_parent(cases, root)
    samples, sources_of_group = [], []
    for image in cases:
        group, why = group_for(image, base)
        sources_of_group.append(why)
        drawing = {**source.drawings[image], "names": names}
        samples.append(Sample(str(image), "case", group,
                              mapping.get(split_of_path(image, root), ""),
                              extra={"drawing": drawing, "case": stem_of_name(image.name)}))
    empty = sum(not (source.labels[p] & set(names)) for p in cases)
    details = {"variant": source.variant, "drawn_masks": True, "source": source.where,
               "format": FORMAT_NAMES.get(source.variant, "run-length encoded CSV"),
               "structures": labels, "label_source": how, "unlabeled": len(unlabeled),
               "annotation_files": len(source.files), "images_without_finding": empty,
               **source.details,
               "label_map": "drawn into one label map per case when indexed (value i + 1 = "
                            "labels[i]; a smaller class is drawn over a larger one); an image "
                            "without a finding gets an empty map"}
    return build_result(root, "image_mask_folders", "segmentation", samples, len(images),
                        details, labels, skipped, group_source(sources_of_group),
                        three_d=False)
