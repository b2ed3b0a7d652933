"""Layouts beyond class folders and label tables, recognised deterministically (autopilot has no
LLM), helped by the datacard description where it names label names or annotation files:

* ``image_mask_folders`` (segmentation; core.datasets.layouts.masks): images and masks in sibling
  folders (images/masks, img/label, imagesTr/labelsTr, image/segmentation_masks,
  Training/{img,label} + unlabeled Testing/img), masks beside their images (``*_seg``,
  ``*_mask``, ``*_label``) and one folder per case with several sequences and a mask (BraTS);
  channels in a fixed order.
* ``box_table`` (detection; core.datasets.layouts.boxes): a CSV of boxes (x, y, w, h or corners; 3D
  with z columns; a row without a box marks a negative image) or COCO-style JSON.
* ``report_table`` (report generation; core.datasets.layouts.reports): CSV report tables joined to
  images directly or through a second table, and JSON report lists (train/test files keep their
  split).

``details["variant"]`` / ``details["format"]`` say which form was found. Every recogniser returns
a ScanResult or None and never writes.
"""
from __future__ import annotations

from pathlib import Path

from core.datasets.layouts.boxes import scan_boxes
from core.datasets.layouts.mask_labels import label_names
from core.datasets.layouts.mask_pairing import IMAGE_DIRS, MASK_DIRS
from core.datasets.layouts.masks import classification_only, scan_masks
from core.datasets.layouts.reports import scan_reports
from core.datasets.layouts.types import all_images

__all__ = ["IMAGE_DIRS", "MASK_DIRS", "classification_only", "label_names",
           "recognise_list_layouts", "scan_boxes", "scan_masks", "scan_reports"]


def recognise_list_layouts(root: Path, top_dirs: list[Path], top_files: list[Path],
                           description: str):
    """Recogniser for the scan dispatcher: report files, box annotations, then masks, looked for
    anywhere in the folder (split folders, case folders, annotation sub-folders)."""
    images = all_images(root)
    if not images:
        return None
    return (scan_reports(root, images, description) or scan_boxes(root, images, description)
            or scan_masks(root, images, description))
