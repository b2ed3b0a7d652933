"""What each field of a record source is, from its values and its name.

Roles: ``annotations`` (a list of records per row: COCO's), ``split`` (train/val/test names),
``constant``, ``finding`` (a binary finding: 1/0/-1/blank, yes/no, true/false, positive/
negative), ``text`` (free text: a report), ``labels`` (several labels per cell: ``A|B``,
``"['a', 'b']"``, a JSON list), ``coord`` (a box coordinate: x, y, w, h, xmin, ...),
``measure`` (a continuous number: age, a score, a size — never a class unless asked),
``patient`` (patient, subject, participant, lesion: the grouping evidence), ``study`` (study,
series, accession), ``attribute`` (acquisition or demographic: sex, view, site, scanner — a
field, not a target unless the request names it), ``id`` (unique per row), ``class`` (a few
categories), ``other``. Whether a field names files is decided against the folder
(core.datasets.records.targets).

May import: core.datasets.layouts (common, tables).
"""
from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass, field

from core.datasets.layouts.common import SPLITS

POSITIVE = {"1", "1.0", "yes", "y", "true", "t", "positive", "pos", "present", "+"}
NEGATIVE = {"0", "0.0", "no", "n", "false", "f", "negative", "neg", "absent", "-"}
UNCERTAIN = {"-1", "-1.0", "uncertain", "u", "?", "unknown", "na", "n/a", "nan"}
MISSING = {"na", "n/a", "nan", "none", "null", "-", "--", "?", "."}
NUMBER = re.compile(r"^-?\d+(?:\.\d+)?(?:e-?\d+)?$", re.I)
PATIENT_NAME = re.compile(r"patient|subject|participant|person|individual|\bpid\b|\bmrn\b|"
                          r"lesion_?id|case_?id|pat_?id|^case$|^ptid$|^rid$", re.I)
STUDY_NAME = re.compile(r"study|series|accession|exam|visit|scan_?id", re.I)
ATTRIBUTE_NAME = re.compile(
    r"^(?:sex|gender|m/f|race|ethnicity|view|view_?position|projection|frontal/lateral|ap/pa|"
    r"position|laterality|eye|side|(?:site|institut\w*|hospital|cent(?:er|re)|scanner|machine|"
    r"device|station|vendor|manufacturer)(?:_?(?:id|no|code|name))?|"
    r"model|modality|body_?part\w*|data_?provider|provider|source|dataset|localization|"
    r"protocol|dx_?type|orientation|reader|annotator|rater|fold|"
    r"batch|part|shard|chunk|width|height|depth|channels?|format|image_?type|photometric\w*|"
    # a column named for the body part imaged (FracAtlas: hand, leg, hip, shoulder 0/1)
    r"hand|leg|hip|shoulder|knee|ankle|wrist|elbow|foot|feet|arm|forearm|finger|humerus|"
    r"femur|pelvis|spine|skull|head|neck|chest|thorax|abdomen|body_?part)$",
    re.I)
PATIENT_OWNED = re.compile(r"^(?:patient|subject|participant|person)[_\s]?"
                           r"(sex|gender|age|weight|size|height|birth\w*|name|position|"
                           r"orientation|comments?|race|ethnic\w*|bmi|status)$", re.I)
ID_NAME = re.compile(r"(?:record|row|image|sample|item)?[ _]?(?:id|uid|identifier|key|no\.?)", re.I)
ID_SUFFIX = re.compile(r"(?:[_\s-]id|ID|(?<=[a-z0-9])Id)$")   # BraTS21ID, case_id, PatientId
COUNT_NAME = re.compile(r"count|number|^num_|_num$|^n_|^nb_|total", re.I)
MEASURE_NAME = re.compile(r"age|score|size|volume|weight|height|bmi|year|time|days?|count|"
                          r"spacing|thickness|area|length|diameter|dose|duration|survival|"
                          r"months|pixel|width|depth|frames?|number|num_|\bn_", re.I)
COORD_NAME = re.compile(r"^(?:x|y|z|w|h|d|x[0-2]|y[0-2]|z[0-2]|[xyz]_?(?:min|max|center|centre)|"
                        r"(?:min|max)_?[xyz]|width|height|depth|coord_?[xyz]|[xyz]_?coord|"
                        r"bbox\w*|box\w*|diameter\w*)$", re.I)
LABEL_NAME = re.compile(r"label|finding|diagnos|class|target|category|outcome|grade|"
                        r"stage|subtype|type|dx|result|status|disease|abnormal|group", re.I)
TEXT_NAME = re.compile(r"report|finding|impression|text|caption|note|conclusion|summary", re.I)
LIST_SEP = re.compile(r"\s*[|;，；、]\s*")   # full-width comma and semicolon, ideographic comma
LABEL_SEP = re.compile(r"\s*[|;,，；、]\s*")   # in a labels field a quoted "A,B" is 2 labels
MAX_CLASSES = 60
ORIGIN = "__dir__"   # the folder of the table a record came from (core.datasets.records.sources)


@dataclass
class FieldInfo:
    name: str
    role: str
    filled: int = 0
    distinct: int = 0
    examples: list[str] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)

    def to_json(self) -> dict:
        return {"name": self.name, "role": self.role, "filled": self.filled,
                "distinct": self.distinct, "examples": self.examples[:3]}


def split_labels(value) -> list[str]:
    """The labels a ``labels`` cell holds: a list, ``"['a', 'b']"``, ``A|B``, ``A;B``."""
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    text = str(value or "").strip()
    if text.startswith("[") and text.endswith("]"):
        try:
            parsed = ast.literal_eval(text)
            if isinstance(parsed, (list, tuple)):
                return [str(v).strip() for v in parsed if str(v).strip()]
        except (ValueError, SyntaxError):
            text = text.strip("[]")
    return [t for t in LABEL_SEP.split(text) if t]


def binary_value(value) -> str | None:
    """'pos', 'neg', 'uncertain', 'blank' or None (not a binary value)."""
    text = str(value if value is not None else "").strip().lower()
    if text == "":
        return "blank"
    if text in POSITIVE:
        return "pos"
    if text in NEGATIVE:
        return "neg"
    if text in UNCERTAIN:
        return "uncertain"
    return None


def _role(name: str, values: list, n_rows: int) -> str:
    bare = name.strip().lower()
    if any(isinstance(v, list) and v and isinstance(v[0], dict) for v in values):
        return "annotations"
    texts = [v for v in values if not isinstance(v, list)]
    filled = [str(v).strip() for v in texts if str(v).strip()]
    lists = [v for v in values if isinstance(v, list)]
    if lists and not filled and all(not isinstance(i, (dict, list)) for v in lists for i in v):
        return "labels"
    if lists:
        return "other"   # polygons, nested numbers
    distinct = set(filled)
    if not distinct:
        return "constant"
    lower = {d.lower() for d in distinct}
    if lower <= set(SPLITS) and (len(lower) >= 2 or bare in ("split", "set", "subset")):
        return "split"
    if len(distinct) == 1 and len(filled) == n_rows:
        return "constant"
    kinds = [binary_value(v) for v in texts]
    if None not in kinds and "pos" in kinds and ("neg" in kinds or "blank" in kinds):
        # 1/0, or 1 and blanks (CheXpert: a blank is a finding not mentioned); a count that
        # happens to be 0/1 here (fracture_count, num_lesions) is a measure
        if COUNT_NAME.search(bare) and not LABEL_NAME.search(bare):
            return "measure"
        return "finding" if not ATTRIBUTE_NAME.match(bare) else "attribute"
    if len(distinct) == 1:
        return "constant"
    mean_len = sum(len(v) for v in filled) / len(filled)
    mean_words = sum(len(v.split()) for v in filled) / len(filled)
    if (mean_words >= 3 and TEXT_NAME.search(bare) and not LABEL_NAME.fullmatch(bare)) or \
            (mean_words >= 8 and mean_len >= 40):
        return "text"
    if PATIENT_NAME.search(bare):
        owner = PATIENT_OWNED.match(bare)   # PatientSex, patient_age: about the patient
        if owner:
            return "measure" if MEASURE_NAME.search(owner.group(1)) else "attribute"
        return "patient" if len(distinct) >= 3 else "attribute"
    if ATTRIBUTE_NAME.match(bare):
        return "attribute"
    present = [v for v in filled if v.lower() not in MISSING]
    numeric = bool(present) and all(NUMBER.match(v) for v in present)
    if numeric and COORD_NAME.match(bare):
        return "coord"
    multi = [v for v in filled if LIST_SEP.search(v) or (v.startswith("[") and v.endswith("]"))]
    if len(multi) >= 0.1 * len(filled) and len(multi) >= 2:
        tokens = Counter(t for v in filled for t in split_labels(v))
        if tokens and len(tokens) <= MAX_CLASSES and tokens.most_common(1)[0][1] >= 2:
            return "labels"
    if STUDY_NAME.search(bare) and not LABEL_NAME.search(bare):
        return "study"
    if (ID_NAME.fullmatch(bare) or ID_SUFFIX.search(name.strip())) and \
            len(distinct) >= 0.5 * len(filled) and len(filled) >= 4:
        # an integer record number named ID is not a measure (unique per table; ids restart
        # in each split's table, RFMiD, so over merged tables at least half are distinct)
        return "id"
    if numeric:
        integers = all(re.fullmatch(r"-?\d+(?:\.0+)?", v) for v in present)
        if MEASURE_NAME.search(bare) and not LABEL_NAME.search(bare):
            return "measure"
        if not (integers and len(distinct) <= 10):
            return "measure"
    if len(distinct) == len(filled) and len(filled) >= 8:
        return "id"
    if 2 <= len(distinct) <= MAX_CLASSES and len(distinct) <= max(2, len(filled) // 2):
        return "class"
    return "other"


def profile(records: list[dict], limit: int = 20_000) -> dict[str, FieldInfo]:
    """Each field of ``records`` with its role (see the module docstring)."""
    rows = records[:limit]
    names: dict[str, None] = {}
    for r in rows:
        for k in r:
            if k != ORIGIN:   # where the record was read, not a field of it
                names.setdefault(k, None)
    out = {}
    for name in names:
        values = [r.get(name, "") for r in rows]
        role = "annotations" if name == "__annotations__" else \
            "split" if name == "__split__" else _role(name, values, len(rows))
        plain = [str(v).strip() for v in values if not isinstance(v, list) and str(v).strip()]
        counts = Counter(plain)
        out[name] = FieldInfo(name, role, len(plain), len(counts),
                              [v for v, _ in counts.most_common(3)], counts)
    return out


# the two outcomes of a binary reading, negative first, as a description may name them
POLARITY = [("normal", "abnormal"), ("negative", "positive"), ("benign", "malignant"),
            ("healthy", "diseased"), ("absent", "present"), ("non-severe", "severe"),
            ("not severe", "severe"), ("no", "yes"), ("false", "true")]


def polarity_pair(description: str) -> tuple[str, str] | None:
    """(negative, positive) class names the description uses for a binary reading."""
    for neg, pos in POLARITY:
        if all(re.search(r"(?<![\w-])" + re.escape(w) + r"(?![\w-])", description or "", re.I)
               for w in (neg, pos)):
            return neg, pos
    return None
