"""The words of medical imaging requests and dataset descriptions: which task, modality,
anatomy and dimension a text names. Read by registration (a datacard's description) and by the
Task Manager's matching (a user's request).

May import: the standard library only."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

REPORT_WORDS = (r"\breports?\b|\bimpressions?\b|\bcaption\w*|"
                r"\b(?:write|generat|draft)\w* (?:the )?findings")

SEGMENT_VERBS = r"\bsegment\w*|\bdelineat\w*|\bcontour\w*|\bmasks?\b|\bparcellat\w*"

DIAGNOSIS_VERBS = (r"\bclassif\w*|\bdiagnos\w*|\bdistinguish\w*|\bversus\b|\bvs\.?\b|"
                   r"\bpredict\w*|\bgrad(?:e|ing)\b|\bstag(?:e|ing)\b|\bscreen\w*")

LESION_WORDS = (r"\banomal\w*|\babnormal\w*|\blesions?\b|\btumou?rs?\b|\bnodules?\b|"
                r"\bbounding box|\blocali[sz]\w*|\bhaemorrhage|\bhemorrhage|\binfection")

DETECT_WORDS = r"\bdetect\w*|\btell\b.*\bfrom\b|\bidentify\w*"

MODALITY_WORDS = {
    "CT": r"\bct\b|computed tomography|\bcat scan",
    "MRI": r"\bmri?\b|magnetic resonance|\bt1\b|\bt2\b|\bflair\b",
    "X-ray": r"x-?rays?|\bradiograph\w*|\bcxr\b|\bchest film",
    "Ultrasound": r"ultrasound|\bsonograph\w*|\bechocardiograph\w*",
}

ANATOMY_WORDS = {
    "chest": (r"\bchest\b|\blungs?\b|\bthora\w*|\bpulmonary\b|\bpneumon\w*|\bcovid\w*|\bcardiac\b"
              r"|\bheart\b"),
    "brain": (r"\bbrain\b|\bcereb\w*|\bneuro\w*|\balzheimer\w*|\bdementia\b|\bintracranial\b"
              r"|\bhead\b"),
    "knee": r"\bknees?\b|\bacl\b|\bmenisc\w*|\bcruciate\b",
    "abdomen": (r"\babdom\w*|\bliver\b|\bpancrea\w*|\bspleen\b|\bkidneys?\b|\brenal\b|\bstomach\b"
                r"|\bgallbladder\b"),
    "spine": r"\bspin\w*|\bvertebra\w*|\blumbar\b|\bcervical\b",
}

ANATOMY_PARENTS = {"kidney": "abdomen", "liver": "abdomen", "pancreas": "abdomen",
                   "head": "brain", "lung": "chest", "thorax": "chest"}

STOPWORDS = set("""a an and are as at be build by can classify classification data dataset
for from in into is it me model models of on or please the this to train using versus vs
which with want would like need images image scans scan make create""".split())


@dataclass
class Intent:
    task: str = ""
    modality: str = ""
    anatomy: str = ""
    dimension: str = ""
    words: list[str] = field(default_factory=list)


def _task_of(text: str) -> str:
    """Verbs decide first (write a report, segment, classify); lesion words then mean anomaly
    detection; a bare 'detect' means diagnosis."""
    if re.search(REPORT_WORDS, text):
        return "report_generation"
    if re.search(SEGMENT_VERBS, text):
        return "anomaly_detection" if re.search(LESION_WORDS, text) else "segmentation"
    if re.search(DIAGNOSIS_VERBS, text):
        return "diagnosis"
    if re.search(LESION_WORDS, text):
        return "anomaly_detection"
    if re.search(DETECT_WORDS, text):
        return "diagnosis"
    return ""


def parse_request(request: str) -> Intent:
    text = request.lower()
    intent = Intent(task=_task_of(text))
    for modality, pattern in MODALITY_WORDS.items():
        if re.search(pattern, text):
            intent.modality = modality
            break
    for anatomy, pattern in ANATOMY_WORDS.items():
        if re.search(pattern, text):
            intent.anatomy = anatomy
            break
    if re.search(r"\b3d\b|\bvolum\w*", text):
        intent.dimension = "3D"
    elif re.search(r"\b2d\b|\bslices?\b", text):
        intent.dimension = "2D"
    intent.words = sorted({w for w in re.findall(r"[a-z][a-z0-9-]{2,}", text)} - STOPWORDS)
    return intent
