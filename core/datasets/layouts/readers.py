"""The readers the interpretation step asks, in prior order (more specific first). Each takes
``(root, top_dirs, top_files, description)`` and returns a ScanResult, None when the folder holds
nothing it reads, or raises ScanError saying why the reading it found cannot be used.

May import: every reader module of core.datasets.layouts.
"""
from __future__ import annotations

from pathlib import Path

from core.datasets.layouts.arrays import recognise_array_files
from core.datasets.layouts.boxes import scan_boxes
from core.datasets.layouts.class_folders import scan_class_folders
from core.datasets.layouts.dicom import recognise_dicom_series
from core.datasets.layouts.drawn_masks import scan_drawn_masks
from core.datasets.layouts.filenames import recognise_filename_labels
from core.datasets.layouts.known_formats import formats_of_reading
from core.datasets.layouts.mask_structures import scan_structure_masks
from core.datasets.layouts.masks import scan_masks
from core.datasets.layouts.reports import scan_reports
from core.datasets.layouts.sidecars import scan_labelme, scan_text_reports
from core.datasets.layouts.types import ScanResult, all_images
from core.datasets.layouts.voc import scan_voc
from core.datasets.layouts.yolo import scan_yolo


def _with_images(scan):
    def reader(root: Path, top_dirs, top_files, description: str):
        images = all_images(root)
        return scan(root, images, description) if images else None
    reader.__name__ = scan.__name__
    return reader


READERS: list = [
    ("dicom_series", recognise_dicom_series),
    ("arrays", recognise_array_files),
    ("report_table", _with_images(scan_reports)),
    ("text_reports", scan_text_reports),
    ("box_table", _with_images(scan_boxes)),
    ("voc", scan_voc),
    ("yolo", scan_yolo),
    ("labelme", scan_labelme),
    ("masks", _with_images(scan_masks)),
    ("structure_masks", _with_images(scan_structure_masks)),
    ("drawn_masks", _with_images(scan_drawn_masks)),
    ("filename_labels", recognise_filename_labels),
    ("class_folders", scan_class_folders),
]

# Each reader's prior in the interpretation score (1 = the most specific reader): its place in
# the reader order as it stood when label tables and JSON sidecars had readers of their own
# (now the records engine's, core.datasets.records), kept fixed so that a reader leaving the
# list does not move the others' scores. A label table's preferred records target takes the
# label-table reader's place.
_PLACES = ["dicom_series", "arrays", "report_table", "text_reports", "box_table", "voc", "yolo",
           "labelme", "masks", "structure_masks", "(label_table)", "(json_sidecars)",
           "filename_labels", "class_folders"]
PRIOR = {name: 1.0 - i / len(_PLACES) for i, name in enumerate(_PLACES)}
PRIOR["drawn_masks"] = PRIOR["masks"]   # masks drawn as runs or outlines: masks all the same
LABEL_TABLE_PRIOR = PRIOR["(label_table)"]


def reading_formats(reader: str, scan: ScanResult) -> set[str]:
    """The known formats (core/datasets/formats/*.json) a reading stands for."""
    return formats_of_reading(reader, scan.details, scan.layout)
