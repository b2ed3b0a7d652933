"""Label names of a segmentation dataset (``labels[i]`` is mask value i + 1): from
``labels.json`` (a list, {value: name} or {name: value}), a Decathlon/nnU-Net ``dataset.json``
(or any top-level JSON with such a ``labels`` entry), the datacard description ("labels: 1 liver,
2 spleen"), else from the values found in a few masks (``label_1``, ``label_2``, ...).

May import: core.datasets.layouts.mask_files, core.datasets.layouts.common,
core.datasets.layouts.tables."""
from __future__ import annotations

import re
from pathlib import Path

from core.datasets.layouts.common import load_json
from core.datasets.layouts import links
from core.datasets.layouts.mask_files import mask_values
from core.datasets.layouts.tables import code_mapping, described_finding


def _names_from_mapping(data) -> list[str] | None:
    """labels from a list (position i -> value i + 1; a leading "background" dropped), a
    {value: name} or a {name: value} mapping (value 0 = background dropped)."""
    if isinstance(data, list) and data and all(isinstance(x, (str, int)) for x in data):
        names = [str(x) for x in data]
        return names[1:] if names[0].strip().lower() == "background" else names
    if not isinstance(data, dict) or not data:
        return None
    if all(str(k).strip().isdigit() for k in data):
        values = {int(k): str(v) for k, v in data.items()}
    elif all(isinstance(v, int) or (isinstance(v, str) and v.strip().isdigit())
             for v in data.values()):
        values = {int(v): str(k) for k, v in data.items()}
    elif all(isinstance(v, list) and v and all(isinstance(x, int) for x in v)
             for v in data.values()):  # nnU-Net region labels {"whole": [1, 2, 3]}: not values
        return None
    else:
        return None
    values = {v: n for v, n in values.items() if v > 0}
    if not values:
        return None
    return [values.get(v, f"label_{v}") for v in range(1, max(values) + 1)]


def _label_files(root: Path) -> list[Path]:
    files = [root / "labels.json", *sorted(root.glob("*/labels.json")), root / "dataset.json",
             *sorted(root.glob("*/dataset.json"))]
    files += sorted(p for p in root.glob("*.json") if p not in files)
    return [p for p in links.kept(files) if p.is_file() and p.stat().st_size < 5_000_000]


def labels_from_files(root: Path) -> tuple[list[str], str] | None:
    for path in _label_files(root):
        data = load_json(path)
        if isinstance(data, dict) and ("labels" in data or path.name != "labels.json"):
            data = data.get("labels")
        names = _names_from_mapping(data)
        if names:
            return names, path.name
    return None


LABEL_TRIGGER = re.compile(r"\b(?:label(?:s| names| values)?|mask values|classes|class names|"
                           r"segmentation labels)\s*(?:are\b|:|=|\()", re.I)
VALUE_NAME = re.compile(r"(?<![\w.])(\d{1,3})\s*(?:[:=]|->|→|-)?\s*([A-Za-z][\w\- ]*?)\s*"
                        r"(?=[,;)/]|\band\b|$)", re.I)
NAME_VALUE = re.compile(r"([A-Za-z][\w\- ]*?)\s*(?:[:=]|\(|->)\s*(\d{1,3})\)?\s*"
                        r"(?=[,;)]|\band\b|$)", re.I)


def labels_from_description(description: str) -> list[str] | None:
    """Label names a datacard description states: "labels: 1 liver, 2 spleen", "mask values:
    0 = background, 1 = kidney", "label values: liver=1, spleen=2" or "labels: liver, spleen"
    (in mask-value order)."""
    for match in LABEL_TRIGGER.finditer(description or ""):
        rest = description[match.end():]
        segment = re.split(r"\.(?:\s|$)|\n", rest, maxsplit=1)[0].strip()
        pairs = {int(v): n.strip() for v, n in VALUE_NAME.findall(segment)}
        if not pairs:
            pairs = {int(v): n.strip() for n, v in NAME_VALUE.findall(segment)}
        pairs = {v: n for v, n in pairs.items() if v > 0 and n.lower() != "background"}
        if pairs:
            return [pairs.get(v, f"label_{v}") for v in range(1, max(pairs) + 1)]
        words = [w.strip() for w in re.split(r",|;|\band\b|/", segment) if w.strip()]
        if words and all(re.fullmatch(r"[A-Za-z][A-Za-z\- ]{0,40}", w) for w in words):
            names = [w for w in words if w.lower() != "background"]
            if names:
                return names
    return None


MASK_SENTENCE = re.compile(r"contour|mask|segment|label|delineat|annotat|outline|drawn|manual",
                           re.I)
LIST_ITEM = re.compile(r"^(?:the\s+)?([A-Za-z][A-Za-z\-]*(?:\s+[A-Za-z][A-Za-z\-]*){0,3})$")


def listed_names(description: str, count: int) -> list[str] | None:
    """The ``count`` structure names a sentence about the masks lists ("manual contours of the
    right ventricle, myocardium and left ventricle"), in the order given; None unless exactly
    one such list of ``count`` names is found."""
    found = []
    for sentence in re.split(r"(?<=[.;])\s+|\n", description or ""):
        if not MASK_SENTENCE.search(sentence):
            continue
        for run in re.finditer(r"(?:[A-Za-z][\w\- ]*?,\s*)+[A-Za-z][\w\- ]*?,?\s+and\s+"
                               r"[A-Za-z][\w\- ]*?(?=[.;:)]|$)", sentence):
            head, _, rest = run.group(0).partition(",")
            head = re.split(r"\b(?:of|for|are|include[sd]?|including|namely|outlined|"
                            r"delineated|contoured|segmented|annotated|marked|labell?ed|"
                            r"drawn|traced|shows?)\b|:", head)[-1]
            items = [i.strip() for i in [head, *re.split(r",|\band\b", rest)] if i.strip()]
            names = [LIST_ITEM.match(i.strip()) for i in items]
            if len(items) == count and all(names):
                found.append([n.group(1) for n in names])
    return found[0] if len(found) == 1 else None


def _described(description: str, values: list[int]) -> tuple[list[str], dict] | None:
    """Names of the mask values found, from the description: by code ("1 necrotic core,
    2 edema, 4 enhancing tumour": values need not be 1..N), else a list of as many structures
    as there are values, matched in order (said to be a guess on the card)."""
    if not values or len(values) > 32:
        return None
    facts = {} if values == list(range(1, len(values) + 1)) else {"label_values": values}
    coded = code_mapping(description, [str(v) for v in values])
    if coded:
        return [coded[str(v)] for v in values], {"label_source": "description (values named)",
                                                 **facts}
    listed = listed_names(description, len(values))
    if listed:
        return listed, {"label_source": "description (names in the order listed, matched to "
                        f"mask values {', '.join(map(str, values))} in that order: check)",
                        **facts}
    return None


SLICER_FIELD = re.compile(r"^Segment(\d+)_(Name|LabelValue|Layer):=(.*)$")


def slicer_segments(mask: Path) -> list[tuple[int, str, int]]:
    """(label value, name, layer) of each segment a 3D Slicer ``.seg.nrrd`` header declares
    (header text only; the voxels are not read)."""
    if not mask.name.lower().endswith(".seg.nrrd"):
        return []
    try:
        with open(mask, "rb") as handle:
            head = b""
            while b"\n\n" not in head and len(head) < 1_048_576:
                chunk = handle.read(16_384)
                if not chunk:
                    break
                head += chunk
        head = head.split(b"\n\n", 1)[0].decode("latin-1")
    except OSError:
        return []
    fields: dict[str, dict[str, str]] = {}
    for line in head.splitlines():
        match = SLICER_FIELD.match(line.strip())
        if match:
            fields.setdefault(match[1], {})[match[2]] = match[3].strip()
    out = []
    for index, f in sorted(fields.items(), key=lambda kv: int(kv[0])):
        value = f.get("LabelValue", str(int(index) + 1))
        if value.strip().isdigit() and f.get("Name"):
            out.append((int(value), f["Name"], int(f.get("Layer", "0") or 0)))
    return out


def segment_values(mask: Path, labels: list[str]) -> list[int] | None:
    """The values ``labels`` have in this 3D Slicer segmentation, in label order, when they are
    not 1..N: Slicer numbers segments per file, so one case may store 'tumor' as 1 and the next
    as 2. A label the file lacks gets -1 (no voxel has it). None for any other mask."""
    segments = slicer_segments(mask)
    if not segments or len({layer for *_, layer in segments}) != 1:
        return None
    value_of = {n: v for v, n, _ in segments}
    values = [value_of.get(name, -1) for name in labels]
    return None if values == list(range(1, len(labels) + 1)) else values


def _binary_names(values: list[int], description: str, root: Path) -> list[str] | None:
    """A mask with one foreground value stored as 255 (or any single value): its name."""
    named = labels_from_description(description)
    if named and len(named) == 1:
        return named
    match = re.search(r"\b(?:%d|white|foreground)\s*(?:=|:|->|→|means|is)\s*(?:the\s+)?"
                      r"([A-Za-z][\w\- ]{0,40}?)(?=[,.;)]|\band\b|$)" % values[0],
                      description or "", re.I)
    if match:
        return [match[1].strip()]
    found = labels_from_files(root)
    if found and len(found[0]) == 1:
        return found[0][:1]
    finding = described_finding(description) or segmented_object(description)
    return [finding] if finding else None   # "each showing a polyp, outlined by hand"


# what a description says was drawn: "manual vessel segmentations", "the head is outlined",
# "masks of the left ventricle"
_DRAWN = r"(?:segmentations?|masks?|outlines?|delineations?|contours?|annotations?|labels?)"
_NOT_OBJECT = {"manual", "manually", "binary", "ground", "truth", "expert", "pixel", "label",
               "the", "and", "with", "of", "a", "an", "field", "view", "image", "images",
               "reference", "gold", "standard", "annotation", "annotated", "png", "tiff", "gif",
               "nifti", "two", "three", "all", "its", "their", "our", "these", "hand", "drawn"}
_OBJECT_PATTERNS = (
    re.compile(_DRAWN + r"\s+of\s+(?:the\s+|each\s+|every\s+|all\s+)?([a-z]+(?:\s[a-z]+)?)",
               re.I),
    re.compile(r"\b([a-z]+)\s+(?:is|are)\s+(?:manually\s+)?(?:outlined|segmented|delineated|"
               r"contoured|traced|drawn)\b", re.I),
    re.compile(r"\b([a-z]+)\s+" + _DRAWN + r"\b", re.I),
)


def segmented_object(description: str) -> str:
    """The one structure a description says was drawn (DRIVE's "manual vessel
    segmentations" -> vessel, HC18's "the head is outlined" -> head), or ""."""
    for pattern in _OBJECT_PATTERNS:
        for match in pattern.finditer(description or ""):
            words = [w for w in match.group(1).lower().split() if w not in _NOT_OBJECT]
            if words and all(len(w) >= 3 for w in words):
                return " ".join(words)
    return ""


def described_foreground(description: str, root: Path) -> tuple[str, str] | None:
    """(name, where it came from) of the one foreground a description or a labels file names
    ("labels: 1 polyp", a labels.json of one name, or the one finding the text names:
    "pneumothorax masks"), for masks whose files name no class (drawn outlines, runs)."""
    named = labels_from_description(description)
    if named and len(named) == 1:
        return named[0], "description"
    found = labels_from_files(root)
    if found and len(found[0]) == 1:
        return found[0][0], found[1]
    finding = described_finding(description) or segmented_object(description)
    return (finding, "description (the one finding it names)") if finding else None


def label_names(root: Path, description: str, masks: list[Path]) -> tuple[list[str], dict]:
    """(labels, facts): names from files, the description, or mask values (see module doc).
    ``facts["label_values"]``, when present, are the mask values of the labels in order (a
    binary mask stored as 0/255: [255]); the index passes them on so that readers map them to
    1..N."""
    segments = slicer_segments(masks[0]) if masks else []
    if segments and len({layer for *_, layer in segments}) == 1:
        by_value = {v: n for v, n, _ in segments}
        names = [by_value.get(v, f"label_{v}") for v in range(1, max(by_value) + 1)]
        for mask in masks[1:]:   # a segment only some files have (added later in Slicer)
            names += [n for _, n, _ in slicer_segments(mask) if n not in names]
        return names, {"label_source": masks[0].name + " (3D Slicer segment names)"}
    found = labels_from_files(root)
    if found:
        return found[0], {"label_source": found[1]}
    named = labels_from_description(description)
    values = mask_values(masks)
    if len(values) == 1 and values[0] > 32 and not (named and len(named) > 1):
        # a binary mask stored as 0/255 (or 0/128): one label, whatever the value
        names = _binary_names(values, description, root) or ["foreground"]
        return names[:1], {"label_source": "description" if names != ["foreground"] else
                           "mask values (binary)", "mask_values": values,
                           "label_values": values}
    if named:
        return named, {"label_source": "description"}
    described = _described(description, values)
    if described:
        return described[0], {**described[1], "mask_values": values}
    finding = described_finding(description) or segmented_object(description) \
        if len(values) == 1 else ""
    if finding:   # one foreground value, and the description names one finding
        return [finding], {"label_source": "description (the one finding it names)",
                           "mask_values": values,
                           **({"label_values": values} if values != [1] else {})}
    facts = {"label_source": "mask values", "mask_values": values}
    if not values:
        return ["label_1"], facts
    if max(values) <= 32:
        return [f"label_{v}" for v in range(1, max(values) + 1)], facts
    facts["note"] = (f"mask values {values[:10]} are not 1..N; give labels.json or remap the "
                     "masks so that labels[i] is value i + 1")
    return [f"label_{v}" for v in values], facts
