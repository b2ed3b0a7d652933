"""Label names of a segmentation dataset (``labels[i]`` is mask value i + 1): from
``labels.json`` (a list, {value: name} or {name: value}), a Decathlon/nnU-Net ``dataset.json``
(or any top-level JSON with such a ``labels`` entry), the datacard description ("labels: 1 liver,
2 spleen"), else from the values found in a few masks (``label_1``, ``label_2``, ...).

May import: core.datasets.layouts.mask_files, core.datasets.layouts.common."""
from __future__ import annotations

import re
from pathlib import Path

from core.datasets.layouts.common import load_json
from core.datasets.layouts.mask_files import mask_values


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
    return [p for p in files if p.is_file() and p.stat().st_size < 5_000_000]


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


def label_names(root: Path, description: str, masks: list[Path]) -> tuple[list[str], dict]:
    """(labels, facts): names from files, the description, or mask values (see module doc)."""
    found = labels_from_files(root)
    if found:
        return found[0], {"label_source": found[1]}
    named = labels_from_description(description)
    if named:
        return named, {"label_source": "description"}
    values = mask_values(masks)
    facts = {"label_source": "mask values", "mask_values": values}
    if not values:
        return ["label_1"], facts
    if max(values) <= 32:
        return [f"label_{v}" for v in range(1, max(values) + 1)], facts
    facts["note"] = (f"mask values {values[:10]} are not 1..N; give labels.json or remap the "
                     "masks so that labels[i] is value i + 1")
    return [f"label_{v}" for v in values], facts
