"""The words of medical imaging requests and dataset descriptions: which task, modality,
anatomy and dimension a text names. Read by registration (a datacard's description) and by the
Task Manager's matching (a user's request).

Task words are read in order of precedence: an explicit output form wins over a generic verb.

1. a written report (``write the findings``, ``radiology reports``) -> report_generation;
2. boxes (``bounding boxes``, ``draw boxes``) -> anomaly_detection, the task of the datasets
   that train the detection template (box tables);
3. masks (``segment``, ``outline``, ``contour``, ``delineate``, ``mask``) -> segmentation, or
   anomaly_detection (lesion segmentation) when a lesion is named;
4. a location (``localise``, ``where is/are``) -> anomaly_detection with boxes;
5. a diagnosis verb (``classify``, ``diagnose``, ``grade``, ``stage``, ``tell apart``) ->
   diagnosis;
6. a lesion word alone (``nodules``, ``polyps``, ``tumour``) -> anomaly_detection;
7. a generic verb (``detect``, ``identify``, ``find``) -> diagnosis.

Modality and anatomy: the value named most often wins, then the more specific one (mammography
over X-ray, heart over chest), then the one named first.

May import: the standard library only."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

# --------------------------------------------------------------------------- task words
REPORT_WORDS = (
    r"\breport generation\b|\bradiology reports?\b|\breports? for\b|\bcaption\w*|"
    r"\b(?:free[- ]text|narrative) (?:reports?|findings)\b|\breport (?:the |its |their )?findings|"
    r"\b(?:write|writes|writing|wrote|generat\w*|draft\w*|compos\w*|dictat\w*|summari[sz]\w*|"
    r"describ\w*)(?:\W+\w+){0,3}?\W+(?:reports?|findings|impressions?)\b")

BOX_WORDS = r"\b(?:bounding[- ]?)?box(?:es|ed)?\b|\bbbox\w*"

SEGMENT_VERBS = (r"\bsegment\w*|\bdelineat\w*|\bcontour\w*|\bmasks?\b|\bparcellat\w*|"
                 r"\boutlin\w*|\b(?:pixel|voxel)[- ]?(?:wise|level)\b|\bboundar(?:y|ies)\b|"
                 r"\blabel (?:every|each) (?:pixel|voxel)\b")

LOCATE_WORDS = (r"\blocali[sz]\w*|\blocat(?:e|es|ing)\b|\bpinpoint\w*|\bwhere (?:is|are)\b|"
                r"\b(?:show|find|mark|tell me|indicate|highlight|see|predict) where\b|"
                r"\blocations? of\b|\bposition of\b|"
                r"\bcount(?:ing)? (?:the |all |every |each )?(?:\w+ )?\w+s\b")

DIAGNOSIS_VERBS = (r"\bclassif\w*|\bdiagnos\w*|\bdistinguish\w*|\bdifferentiat\w*|"
                   r"\bdiscriminat\w*|\btell (?:\w+ ){0,4}?apart\b|\btell\b.*\bfrom\b|\bversus\b|"
                   r"\bvs\.?(?!\w)|\bpredict\w*|(?<!high-)(?<!low-)(?<!high )(?<!low )"
                   r"\bgrad(?:e|es|ing)\b|\bstag(?:e|es|ing)\b|\bscreen\w*|\bcategori[sz]\w*|"
                   r"\btriag\w*|\bwhether\b|\bsort\w* (?:\w+ ){0,4}?into\b|\bseverity\b|"
                   r"\bprognos\w*|\bsubtyp\w*|\bis there\b|\bare there\b|"
                   r"\bwhich (?:patients|images|scans|cases|studies|slides)\b|"
                   r"\bdoes (?:the |this |a )?(?:patient|image|scan) (?:have|show)\b")

LESION_WORDS = (r"\banomal\w*|\babnormalit\w*|\blesions?\b|\btumou?rs?\b|\bnodules?\b|"
                r"\bpolyps?\b|\bmass(?:es)?\b|\bcysts?\b|\bhaemorrhag\w*|\bhemorrhag\w*|"
                r"\bbleed\w*|\binfections?\b|\bmetasta\w*|\binfarct\w*|\bmitos[ie]s\b|\bmitotic\b|"
                r"\b(?:glio|glioblast|carcin|melan|aden|lymph|mening|meningi|sarc)omas?\b")

DETECT_WORDS = (r"\bdetect\w*|\bidentif\w*|\bfind\b|\bfinds\b|\bspot\w*|\brecogni[sz]\w*|"
                r"\bflag\w*")

# --------------------------------------------------------------------------- modality words
# canonical modality -> pattern; DICOM codes and sequence names are matched separately
MODALITY_WORDS = {
    "CT": (r"\bct\b|computed tomograph\w*|\bcat scans?\b|\bcta\b|\bhrct\b|\bcbct\b|"
           r"\bhounsfield\b"),
    "MRI": (r"\bmri?\b|magnetic resonance|\bt[12]-weighted\b|\bdiffusion-weighted\b|"
            r"\bfmri\b|\bmra\b"),
    "X-ray": r"x-?rays?|\bradiograph\w*|\bcxr\b|\bchest films?\b|\bplain films?\b",
    "Mammography": r"\bmammogra\w*|\bmammo\b|\btomosynthesis\b",
    "Ultrasound": r"ultrasound|\bultrasonograph\w*|\bsonograph\w*|\bechocardiograph\w*",
    "PET": r"\bpet\b|positron emission|\bfdg\b",
    "OCT": r"\boct\b|optical coherence tomograph\w*",
    "Fundus": r"\bfundus\b|\bfundoscop\w*|\bretinal photograph\w*|\beye fundus\b",
    "Endoscopy": (r"\bendoscop\w*|\bcolonoscop\w*|\bgastroscop\w*|\bcystoscop\w*|"
                  r"\bbronchoscop\w*|\blaparoscop\w*|\bcapsule camera\b"),
    "Dermoscopy": (r"\bdermoscop\w*|\bdermatoscop\w*|\bskin photograph\w*|"
                   r"\bclinical photographs? of (?:the )?skin\b"),
    "Histopathology": (r"\bhistopatholog\w*|\bhistolog\w*|\bdigital patholog\w*|"
                       r"\bpatholog\w* slides?\b|\bwhole[- ]slide\b|\bwsi\b|\bmicroscop\w*|"
                       r"\bh&e\b|\bcytolog\w*|\btissue slides?\b|\bstained slides?\b"),
}
# MRI sequence names count only when no modality is named outright ("T1" is also a vertebra)
WEAK_MODALITY_WORDS = {"MRI": r"\bt1\b|\bt2\b|\bflair\b|\bdwi\b|\badc\b"}
# a subtype is compatible with its parent: a mammogram is an X-ray of the breast
MODALITY_PARENTS = {"Mammography": "X-ray"}
MODALITY_CODES = {"cr": "X-ray", "dx": "X-ray", "xr": "X-ray", "mr": "MRI", "us": "Ultrasound",
                  "mg": "Mammography", "pt": "PET", "op": "Fundus", "es": "Endoscopy",
                  "sm": "Histopathology", "xray": "X-ray", "x ray": "X-ray"}

# --------------------------------------------------------------------------- anatomy words
ANATOMY_WORDS = {
    "chest": (r"\bchest\b|\blungs?\b|\bthora\w*|\bpulmonary\b|\bpneumon\w*|\bcovid\w*|"
              r"\bpleura\w*|\bribs?\b"),
    "heart": (r"\bheart\b|\bcardiac\b|\bcardio\w*|\bmyocard\w*|\bcoronar\w*|"
              r"\b(?:left|right) ventric\w*|\batri(?:um|al)\b"),
    "brain": (r"\bbrain\b|\bcereb\w*|\bneuro\w*|\balzheimer\w*|\bdementia\b|\bintracranial\b"
              r"|\bhead\b|\bglio\w*|\bhippocamp\w*|\bskull\b"),
    "eye": (r"\beyes?\b|\bretina\w*|\bretinal\b|\bretinopath\w*|\bmacula\w*|\bocular\b|"
            r"\bophthalm\w*|\bglaucoma\w*|\bdrusen\b|\boptic (?:disc|disk|nerve)\b|\bcornea\w*|"
            r"\bfundus\b"),
    "knee": r"\bknees?\b|\bacl\b|\bmenisc\w*|\bcruciate\b|\bpatell\w*",
    "abdomen": (r"\babdom\w*|\bliver\b|\bhepat\w*|\bpancrea\w*|\bspleen\b|\bkidneys?\b|"
                r"\brenal\b|\bstomach\b|\bgallbladder\b"),
    "colon": (r"\bcolon\w*|\bcolorectal\b|\bbowel\b|\bpolyps?\b|\bgastrointestinal\b|"
              r"\bgi tract\b|\brect(?:um|al)\b|\bintestin\w*"),
    "spine": r"\bspin(?:e|es|al)\b|\bvertebra\w*|\blumbar\b|\bcervical\b|\bintervertebral\b",
    "skin": (r"\bskin\b|\bderma\w*|\bmelanom\w*|\bnev(?:us|i)\b|\bmoles?\b|\bcutaneous\b|"
             r"\bkeratos\w*"),
    "breast": r"\bbreasts?\b|\bmammo\w*|\bmammar\w*|\bbi-?rads\b",
    "prostate": r"\bprostat\w*|\bgleason\b|\bpi-?rads\b",
    "musculoskeletal": (r"\bmusculoskeletal\b|\bbones?\b|\bskelet\w*|\bosteo\w*|"
                        r"\bmsk\b"),
    "hand": (r"(?<!by )\bhands?\b(?![- ](?:drawn|annotated|labell?ed|crafted|traced|segmented))|"
             r"\bfingers?\b|\bphalan\w*|\bmetacarp\w*"),
    "wrist": r"\bwrists?\b|\bscaphoid\b|\bcarpal\b",
    "elbow": r"\belbows?\b|\bolecranon\b",
    "shoulder": r"\bshoulders?\b|\bhumer\w*|\brotator cuff\b",
    "hip": r"\bhips?\b|\bacetabul\w*|\bfemoral (?:head|neck)\b",
    "ankle": r"\bankles?\b|\bfoot\b|\bfeet\b|\bcalcane\w*",
}

# an alias names its canonical region; a canonical region names the region that contains it
ANATOMY_PARENTS = {"kidney": "abdomen", "liver": "abdomen", "pancreas": "abdomen",
                   "head": "brain", "lung": "chest", "thorax": "chest",
                   "retina": "eye", "gastrointestinal": "colon", "bone": "musculoskeletal",
                   "heart": "chest", "colon": "abdomen", "knee": "musculoskeletal",
                   "spine": "musculoskeletal", "hand": "musculoskeletal",
                   "wrist": "musculoskeletal", "elbow": "musculoskeletal",
                   "shoulder": "musculoskeletal", "hip": "musculoskeletal",
                   "ankle": "musculoskeletal"}

DIMENSION_3D = r"\b3-?d\b|\bvolum\w*|\bthree[- ]dimensional\b|\bvoxel\w*"
DIMENSION_2D = r"\b2-?d\b|\bslices?\b|\btwo[- ]dimensional\b|\bframes?\b"

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
    output: str = ""  # an explicit output form: "boxes", "masks", "report" or ""


def task_and_output(text: str) -> tuple[str, str]:
    """(task, output form) of a lower-case request, by the precedence in the module text."""
    if re.search(REPORT_WORDS, text):
        return "report_generation", "report"
    if re.search(BOX_WORDS, text):
        return "anomaly_detection", "boxes"
    if re.search(SEGMENT_VERBS, text):
        return ("anomaly_detection" if re.search(LESION_WORDS, text) else "segmentation",
                "masks")
    if re.search(LOCATE_WORDS, text):
        return "anomaly_detection", "boxes"
    if re.search(DIAGNOSIS_VERBS, text):
        return "diagnosis", ""
    if re.search(LESION_WORDS, text):
        return "anomaly_detection", ""
    if re.search(DETECT_WORDS, text):
        return "diagnosis", ""
    return "", ""


def _ancestors(value: str, parents: dict[str, str]) -> list[str]:
    out = []
    while value in parents and parents[value] not in out:
        value = parents[value]
        out.append(value)
    return out


def _pick(text: str, patterns: dict[str, str], parents: dict[str, str]) -> str:
    """The value named most often; on a tie the more specific one, then the first named."""
    found = {}
    for value, pattern in patterns.items():
        hits = [m.start() for m in re.finditer(pattern, text)]
        if hits:
            found[value] = (len(hits), hits[0])
    if not found:
        return ""
    top = max(count for count, _ in found.values())
    best = {v: pos for v, (count, pos) in found.items() if count == top}
    specific = {v: pos for v, pos in best.items()
                if not any(v in _ancestors(other, parents) for other in best)}
    return min(specific, key=lambda v: specific[v])


def modality_of(text: str) -> str:
    text = text.lower()
    return (_pick(text, MODALITY_WORDS, MODALITY_PARENTS)
            or _pick(text, WEAK_MODALITY_WORDS, MODALITY_PARENTS))


def anatomy_of(text: str) -> str:
    return _pick(text.lower(), ANATOMY_WORDS, ANATOMY_PARENTS)


def dimension_of(text: str) -> str:
    text = text.lower()
    if re.search(DIMENSION_3D, text):
        return "3D"
    if re.search(DIMENSION_2D, text):
        return "2D"
    return ""


def canonical_modality(value: str) -> str:
    """A datacard's modality field as a canonical name ("MR" -> "MRI"); unknown values stay."""
    low = value.lower().strip()
    for modality in MODALITY_WORDS:
        if low == modality.lower():
            return modality
    return MODALITY_CODES.get(low) or modality_of(low) or value.strip()


def canonical_anatomy(value: str) -> str:
    """A datacard's anatomy field as a canonical region ("kidney" -> "abdomen")."""
    low = value.lower().strip()
    if low in ANATOMY_WORDS:
        return low
    return anatomy_of(low) or ANATOMY_PARENTS.get(low, low)


def modality_ancestors(value: str) -> list[str]:
    return _ancestors(value, MODALITY_PARENTS)


def anatomy_ancestors(value: str) -> list[str]:
    return _ancestors(value, ANATOMY_PARENTS)


def parse_request(request: str) -> Intent:
    text = request.lower()
    task, output = task_and_output(text)
    intent = Intent(task=task, modality=modality_of(text), anatomy=anatomy_of(text),
                    dimension=dimension_of(text), output=output)
    intent.words = sorted({w for w in re.findall(r"[a-z][a-z0-9-]{2,}", text)} - STOPWORDS)
    return intent


def mentions_modality(text: str, modality: str) -> bool:
    """Whether ``text`` names ``modality`` or one of its subtypes (a mammogram is an X-ray)."""
    text = text.lower()
    kinds = [modality] + [m for m, parent in MODALITY_PARENTS.items() if parent == modality]
    return any(re.search(MODALITY_WORDS.get(k, r"(?!)"), text)
               or re.search(WEAK_MODALITY_WORDS.get(k, r"(?!)"), text) for k in kinds)


def mentions_anatomy(text: str, anatomy: str) -> bool:
    """Whether ``text`` names ``anatomy`` or a region inside it."""
    text = text.lower()
    return any(re.search(pattern, text) for region, pattern in ANATOMY_WORDS.items()
               if region == anatomy or anatomy in anatomy_ancestors(region))
