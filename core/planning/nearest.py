"""When no dataset fits a request: the nearest registered dataset and what differs, in the words
a clinician reads, e.g. "Nearest: 'Chest X-ray demo' — X-ray, chest, 2D, diagnosis of
NORMAL/PNEUMONIA; your request asks for CT and COVID-19."

Built from the Task Manager's verdict per criterion (task, output, modality, anatomy,
dimension, classes, availability; core.planning.matching) and from the findings the request
names that the card's classes do not hold. Findings are the request's words left once its task
verbs, modality, dimension, body-region words, stopwords and generic class words are set
aside; neighbouring words stay one finding ("diabetic retinopathy").

May import: core.datasets, core.planning.class_terms, core.planning.words.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from core.datasets.datacards import Datacard
from core.datasets.vocabulary import (BOX_WORDS, DETECT_WORDS, DIMENSION_2D, DIMENSION_3D,
                                      MODALITY_WORDS, SEGMENT_VERBS, STOPWORDS,
                                      WEAK_MODALITY_WORDS, Intent)
from core.planning.class_terms import class_terms
from core.planning.words import GENERIC_CLASS_WORDS, norm, words

TASK_TEXT = {"diagnosis": "diagnosis", "segmentation": "segmentation",
             "anomaly_detection": "lesion detection", "report_generation": "report generation"}
MAX_CLASSES_SHOWN = 6

# one-word task verbs (DIAGNOSIS_VERBS also holds phrases such as "tell ... from")
TASK_VERBS = (r"\bclassif\w*|\bdiagnos\w*|\bdistinguish\w*|\bdifferentiat\w*|\bdiscriminat\w*|"
              r"\bpredict\w*|\bgrad(?:e|es|ing)\b|\bstag(?:e|es|ing)\b|\bscreen\w*|"
              r"\bcategori[sz]\w*|\btriag\w*|\bseverity\b|\bprognos\w*|\bsubtyp\w*|"
              r"\blocali[sz]\w*|\blocat(?:e|es|ing)\b|\bcount\w*|\bsort\w*|\bgenerat\w*|"
              r"\bwrit\w*|\bdraft\w*|\bdescrib\w*|\bsummari[sz]\w*|\bcaption\w*|\bdraw\w*|"
              r"\bmark\w*|\bhighlight\w*|\blabel\w*|\bannotat\w*|\bdetect\w*|\bidentif\w*")
# body regions and organs (the anatomy criterion speaks for them), not findings
REGION_WORDS = (
    r"\bchests?\b|\blungs?\b|\bthora\w*|\bpulmonary\b|\bpleura\w*|\bribs?\b|\bhearts?\b|"
    r"\bcardiac\b|\bcoronar\w*|\bventric\w*|\batri(?:um|al)\b|\bbrains?\b|\bcereb\w*|"
    r"\bintracranial\b|\bheads?\b|\bskulls?\b|\bhippocamp\w*|\beyes?\b|\bretina\w*|"
    r"\bmacula\w*|\bocular\b|\bcornea\w*|\bknees?\b|\bmenisc\w*|\bpatell\w*|\babdom\w*|"
    r"\blivers?\b|\bhepat\w*|\bpancrea\w*|\bspleens?\b|\bkidneys?\b|\brenal\b|\bstomach\b|"
    r"\bgallbladder\b|\bcolons?\b|\bcolorectal\b|\bbowels?\b|\brect(?:um|al)\b|\bintestin\w*|"
    r"\bgastrointestinal\b|\bspin(?:e|es|al)\b|\bvertebra\w*|\blumbar\b|\bcervical\b|\bskin\b|"
    r"\bbreasts?\b|\bprostat\w*|\bbones?\b|\bskelet\w*|\bmusculoskeletal\b|\bhands?\b|"
    r"\bfingers?\b|\bwrists?\b|\belbows?\b|\bshoulders?\b|\bhips?\b|\bankles?\b|\bfoot\b|"
    r"\bfeet\b|\borgans?\b|\bbody\b|\bwhole-body\b")
# words of a request that name no finding
REQUEST_WORDS = set("""
about across adult adults against all also among and any apart are automatic automatically
automated based best between can case cases category categories check child children class
classes classifier clinic computed coherence could deep detector did does done each emission
every fast findings frame frames from get give group groups has have help hospital how
impression impressions into its just kind kinds learning look magnetic may might more most
must network neural new one only optical our paediatric patient patients pediatric people
person per photo photographs photos picture pictures positron program quickly radiologist
radiology report reports resonance set shall should show shows slide slides some studies study
subject subjects system than that the their them then there these those three tell tomography
tool train trained training two type types use using via ward want what where whether which
who whose will wish would you your
""".split())
NOT_FINDING = re.compile("|".join([TASK_VERBS, REGION_WORDS, BOX_WORDS, SEGMENT_VERBS,
                                   DETECT_WORDS, DIMENSION_3D, DIMENSION_2D,
                                   *MODALITY_WORDS.values(), *WEAK_MODALITY_WORDS.values()]))
TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9'-]{2,}")


def request_findings(request: str) -> list[str]:
    """The findings a request names, as written: "COVID-19", "diabetic retinopathy"."""
    found: list[tuple[int, int]] = []
    for match in TOKEN.finditer(request):
        low = match.group().lower().strip("'-")
        if (low in STOPWORDS or low in REQUEST_WORDS or norm(low) in GENERIC_CLASS_WORDS
                or NOT_FINDING.fullmatch(low) or NOT_FINDING.match(low)):
            continue
        if found and not request[found[-1][1]:match.start()].strip():
            found[-1] = (found[-1][0], match.end())  # the next word of the same finding
        else:
            found.append((match.start(), match.end()))
    phrases: list[str] = []
    for start, end in found:
        phrase = request[start:end].strip("'-")
        if phrase.lower() not in (p.lower() for p in phrases):
            phrases.append(phrase)
    return phrases


def missing_findings(findings: Sequence[str], card: Datacard) -> list[str]:
    """The findings the card names nowhere: not in its classes (by name or by the
    description's spelling of a class code), its name or its description."""
    held = words(f"{card.name} {card.description}")
    for name in card.classes:
        for term in class_terms(name, card.description):
            held |= words(term)
    return [f for f in findings if not words(f) <= held]


def describe_card(card: Datacard) -> str:
    """"X-ray, chest, 2D, diagnosis of NORMAL/PNEUMONIA": what the datacard states."""
    tasks = " and ".join(TASK_TEXT.get(t, t.replace("_", " ")) for t in card.tasks)
    classes = "/".join(card.classes[:MAX_CLASSES_SHOWN])
    if len(card.classes) > MAX_CLASSES_SHOWN:
        classes += f"/… ({len(card.classes)} classes)"
    what = f"{tasks} of {classes}" if tasks and classes else tasks or classes
    parts = [card.modality.strip(), card.anatomy.strip(), card.dimension, what]
    return ", ".join(p for p in parts if p) or "a datacard that states no task, modality, " \
                                                 "anatomy or dimension"


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def nearest_sentence(intent: Intent, request: str, card: Datacard,
                     criteria: Mapping[str, str], differences: Sequence[str],
                     label: str = "Nearest") -> str:
    """The nearest card and what the request asks for that it does not have."""
    asks: list[str] = []
    if criteria.get("task") == "differs":
        asks.append(TASK_TEXT.get(intent.task, intent.task)
                    + (" with bounding boxes" if intent.output == "boxes" else ""))
    if criteria.get("output") == "differs":
        asks.append("outlines (masks), where it has only bounding boxes")
    if criteria.get("modality") == "differs":
        asks.append(intent.modality)
    if criteria.get("anatomy") == "differs":
        asks.append(f"the {intent.anatomy}")
    if criteria.get("dimension") == "differs":
        asks.append(f"{intent.dimension} volumes" if intent.dimension == "3D"
                    else intent.dimension)
    asks += missing_findings(request_findings(request), card)
    notes = []
    for field_name in ("modality", "anatomy"):
        if criteria.get(field_name) == "open" and any(
                d.startswith(f"the card states no {field_name}") for d in differences):
            notes.append(f"its datacard states no {field_name}")
    if any(d.startswith("nothing specific ties it") for d in differences):
        notes.append("nothing specific (modality, anatomy or class) links it to your request")
    if criteria.get("available") == "differs":
        notes.append("its images are not on this server (the folder its datacard names is "
                     "missing)")
    text = f"{label}: '{card.name}' — {describe_card(card)}"
    if asks:
        text += f"; your request asks for {_and(asks)}"
    if notes:
        text += "; " + "; ".join(notes)
    if not asks and not notes and differences:
        text += "; " + "; ".join(differences)
    return text + "."
