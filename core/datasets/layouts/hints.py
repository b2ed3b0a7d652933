"""What a datacard description says about where the labels are, read deterministically.

The clinician's description often says plainly how the folder is organised ("boxes are Pascal
VOC XML files in Annotations/", "the second sheet 'Labels' of labels.xlsx", "masks end in
_mask.tif, 255 = tumour", "YOLO format"). ``read_hints`` turns it into facts the
interpretation step scores readings against:

* ``formats``: annotation formats named (voc, yolo, coco, labelme, msd, nnunet, bids, slicer,
  medmnist, dicom_seg, sidecar, reports);
* ``task``: the task the description asks for or describes (segmentation, detection, diagnosis,
  report generation), from the same task words the Task Manager reads;
* ``quoted``: quoted words and file/folder/sheet/column names the text mentions;
* ``affixes``: file-name suffixes or prefixes it names (``_mask``, ``_seg``);
* ``mask_affixes``: file-name endings named in a sentence about masks or outlines (``_les`` in
  "the outline of X.png is X_les.png"); the scan keeps those the folder confirms;
* ``same_name``: it says annotations share the image's name.

May import: core.datasets.layouts.known_formats (the format files' words).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from core.datasets.layouts.known_formats import formats_named

SEGMENT = r"\bsegment\w*|\bdelineat\w*|\bcontour\w*|\boutlin\w*|\bmasks?\b|\bvoxel labels?\b"
DETECT = (r"\bbounding[- ]box\w*|\bboxes\b|\bbox\b|\bbbox\w*|\blocali[sz]\w*|\bdetection\b"
          r"|\bwhere (?:is|are)\b")
REPORT = r"\b(?:write|generat\w*|draft\w*)\b[^.]{0,30}\b(?:reports?|findings)\b|\breport generation"
DIAGNOSE = (r"\bclassif\w*|\bdiagnos\w*|\bgrad(?:e|ing)\b|\bstag(?:e|ing)\b|\btell apart\b"
            r"|\bdistinguish\w*|\blabels? (?:is|are|column)\b|\bclass(?:es)?\b")
MASK_CONTEXT = re.compile(r"\bmasks?\b|\bsegment\w*|\boutlin\w*|\bcontour\w*|\bdelineat\w*|"
                          r"\blabel ?maps?\b|\bROIs?\b|\bregions? of interest\b", re.I)
NAME_AFFIX = re.compile(r"(?:(?<![\w])|(?<=[\w*>}\]]))([_\-][A-Za-z]{2,12})"
                        r"(?:\.[A-Za-z]{2,4}(?:\.gz)?)?(?![\w-])")
AFFIX = re.compile(r"(?<![\w])([_\-.][A-Za-z]{2,12})(?:\.[a-z]{2,4}(?:\.gz)?)?\b")
QUOTED = re.compile(r"['\"`‘“]([^'\"`’”]{1,60})['\"`’”]")
NEGATION = re.compile(r"\bnot (?:needed|used|required|relevant|part of)\b|\bignore\w*|\bunused\b"
                      r"|\birrelevant\b|\bcan be skipped\b", re.I)
PATHLIKE = re.compile(r"(?<![\w])([\w\-]+(?:[/.][\w\-*]+)+/?)")


@dataclass
class Hints:
    formats: set[str] = field(default_factory=set)
    task: str = ""                    # segmentation / detection / diagnosis / report_generation
    tasks: set[str] = field(default_factory=set)   # every task the text mentions
    quoted: list[str] = field(default_factory=list)
    affixes: list[str] = field(default_factory=list)
    mask_affixes: list[str] = field(default_factory=list)  # endings a mask sentence names
    same_name: bool = False
    dismissed: list[str] = field(default_factory=list)  # named as not needed / to ignore
    text: str = ""                    # the description itself
    shown: set[str] = field(default_factory=set)   # formats the folder's files show

    def mentions(self, name: str) -> bool:
        """The description names ``name`` (a sheet, column, file or folder) as a source."""
        return _named(name, self.quoted) and not _named(name, self.dismissed)

    def dismisses(self, name: str) -> bool:
        """The description says ``name`` is not needed ("data.csv ... is not needed")."""
        return _named(name, self.dismissed)


def _named(name: str, texts: list[str]) -> bool:
    low = name.strip().lower()
    return bool(low) and any(low == q.lower() or low in q.lower().split("/") for q in texts)


def read_hints(description: str) -> Hints:
    text = (description or "").lower()
    hints = Hints(text=description or "")
    hints.formats = formats_named(text)   # core/datasets/formats/*.json
    found = {"segmentation": re.search(SEGMENT, text), "detection": re.search(DETECT, text),
             "report_generation": re.search(REPORT, text),
             "diagnosis": re.search(DIAGNOSE, text)}
    hints.tasks = {t for t, m in found.items() if m}
    # an explicit output form (boxes, masks, reports) says more than a generic class word
    for task in ("detection", "segmentation", "report_generation", "diagnosis"):
        if found[task]:
            hints.task = task
            break
    if "reports" in hints.formats and not hints.tasks - {"diagnosis"}:
        hints.task = hints.task or "report_generation"
    raw = description or ""
    hints.quoted = [q.strip() for q in QUOTED.findall(raw)] + PATHLIKE.findall(raw)
    hints.affixes = sorted({a.lower() for a in AFFIX.findall(raw)
                            if re.search(r"mask|seg|label|gt|roi", a, re.I)})
    hints.same_name = "sidecar" in hints.formats
    for sentence in re.split(r"(?<=[.;:])\s+|\n", raw):
        if MASK_CONTEXT.search(sentence):   # "each outline is saved as <name>_les.png"
            hints.mask_affixes += [a.lower() for a in NAME_AFFIX.findall(sentence)]
    hints.mask_affixes = sorted(set(hints.mask_affixes))
    for sentence in re.split(r"(?<=[.;])\s+", raw):
        if NEGATION.search(sentence):
            hints.dismissed += [q.strip() for q in QUOTED.findall(sentence)] + \
                PATHLIKE.findall(sentence)
    return hints
