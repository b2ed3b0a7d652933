"""Pascal VOC detection (layout ``box_table``, ``details["format"] == "voc_xml"``): one XML file
per image (``Annotations/<stem>.xml``: ``<annotation><filename>`` and ``<object><name>``
``<bndbox><xmin>…``), images anywhere (``JPEGImages/``), and the split lists
``ImageSets/Main/{train,val,trainval,test}.txt`` (one stem per line) when the dataset has them.

The XML names its image by ``<filename>`` (or ``<path>``); when that names no file, the image
with the XML's stem is used. An image without an XML file, or an XML without objects, is a
negative. Boxes are kept in pixel corners ``[x0, y0, x1, y1]``; objects marked ``difficult`` are
kept (VOC's evaluation ignores them, the detector still learns from them). XML is parsed with
defusedxml (no entity expansion), and files over 5 MB are skipped.

May import: core.datasets.layouts.boxes, .common, .inventory, .types.
"""
from __future__ import annotations

from pathlib import Path

from defusedxml import ElementTree
from defusedxml.common import DefusedXmlException

from core.datasets.layouts.boxes import boxes_result
from core.datasets.layouts.common import FileMatcher, split_of_name, split_of_path
from core.datasets.layouts.inventory import stem_of_name, take_inventory
from core.datasets.layouts.types import all_images

MAX_XML_BYTES = 5_000_000


def _number(node, tag: str) -> float | None:
    try:
        return float((node.findtext(tag) or "").strip())
    except ValueError:
        return None


def read_voc_xml(path: Path) -> dict | None:
    """{"filename", "path", "objects": [(name, [x0, y0, x1, y1])]} or None (not VOC)."""
    try:
        if path.stat().st_size > MAX_XML_BYTES:
            return None
        tree = ElementTree.parse(str(path))
    except (OSError, ElementTree.ParseError, DefusedXmlException, ValueError):
        return None
    root = tree.getroot()
    if root.tag.lower() != "annotation":
        return None
    objects = []
    for obj in root.iter("object"):
        box = obj.find("bndbox")
        if box is None:
            continue
        corners = [_number(box, t) for t in ("xmin", "ymin", "xmax", "ymax")]
        if None in corners:
            continue
        objects.append(((obj.findtext("name") or "object").strip(), corners))
    return {"filename": (root.findtext("filename") or "").strip(),
            "path": (root.findtext("path") or "").strip(), "objects": objects}


def _split_lists(texts: list[Path]) -> dict[str, str]:
    """{stem: split} from ImageSets/Main/<split>.txt (class-specific lists are ignored)."""
    found: dict[str, str] = {}
    lists = [p for p in texts if p.parent.name == "ImageSets" or
             (p.parent.name == "Main" and p.parent.parent.name == "ImageSets")]
    for path in sorted(lists):
        name = path.stem.lower()
        split = "train" if name == "trainval" else split_of_name(name) \
            if name in ("train", "val", "test", "training", "validation", "testing") else ""
        if not split:
            continue
        for line in path.read_text(errors="replace").splitlines():
            stem = line.strip().split(" ")[0]
            if stem and (split != "train" or stem not in found):
                found[stem] = split
    return found


def scan_voc(root: Path, top_dirs, top_files, description: str = ""):
    """ScanResult for Pascal VOC XML annotations, or None."""
    inv = take_inventory(root)
    xml_files = [p for p in inv.files("annotation") if p.suffix.lower() == ".xml"]
    if not xml_files:
        return None
    images = all_images(root)
    if not images:
        return None
    matcher = FileMatcher(images, root)
    by_stem: dict[str, list[Path]] = {}
    for path in images:
        by_stem.setdefault(stem_of_name(path.name), []).append(path)
    per_image: dict[Path, dict] = {}
    skipped: list[str] = []
    splits = _split_lists(inv.files("text"))  # the inventory's walk, not another
    parsed = 0
    for xml in xml_files:
        data = read_voc_xml(xml)
        if data is None:
            continue
        parsed += 1
        image = matcher.find(data["filename"]) if data["filename"] else None
        if image is None and data["path"]:
            image = matcher.find(data["path"])
        if image is None:
            same = by_stem.get(stem_of_name(xml.name), [])
            image = same[0] if len(same) == 1 else None
        if image is None:
            skipped.append(f"{xml}: names image {data['filename'] or xml.stem!r}, which is not "
                           "in the folder")
            continue
        entry = per_image.setdefault(image, {"boxes": [], "labels": [], "split": ""})
        for name, (x0, y0, x1, y1) in data["objects"]:
            if x1 <= x0 or y1 <= y0:
                skipped.append(f"{xml}: a {name!r} box has no extent; dropped")
                continue
            entry["boxes"].append([x0, y0, x1, y1])
            entry["labels"].append(name)
    if parsed == 0 or not per_image:
        return None
    for image in images:  # images without an XML file are negatives (VOC background images)
        if image not in per_image and stem_of_name(image.name) in splits:
            per_image[image] = {"boxes": [], "labels": [], "split": ""}
    for image, entry in per_image.items():
        entry["split"] = splits.get(stem_of_name(image.name)) or split_of_path(image, root)
    annotation_dir = Path(xml_files[0]).parent
    details = {"format": "voc_xml", "table": str(xml_files[0]), "three_d": False,
               "annotation_files": len(xml_files), "annotation_dir": annotation_dir.name,
               "split_lists": bool(splits),
               "source": f"Pascal VOC XML in {annotation_dir.relative_to(root)}/"}
    return boxes_result(root, {"images": per_image, "details": details}, images, skipped)
