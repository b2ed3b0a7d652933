"""The Task Manager's judgement, made deterministic: read a request, score every datacard.

Compatibility comes first; only compatible cards are ranked. A card is ruled out when:

* task: the request states a task the card does not offer (organ and lesion segmentation cards
  serve each other's requests); a request for outlines (masks) is not served by a card that has
  only bounding boxes;
* modality or anatomy: the request states one and the card states a different one (a subtype
  is compatible: mammography is X-ray; a card of a region inside the requested one is
  compatible; a card of a wider region only when its classes or description name the requested
  one); when the card states none, its name and description are read instead, and when they
  name none either the card needs a specific class named in the request to be tied to it;
* dimension: the request asks for 3D (volumes) and the card is 2D;
* nothing specific ties it: neither modality, anatomy nor a specific class matches. Generic
  class words (normal, abnormal, healthy, positive, negative, control, other, none, benign,
  malignant, ...) never tie a card;
* its folder does not exist on this machine.

Among compatible cards, points for the task, modality, anatomy, dimension, specific classes
named in the request and shared description words decide. Each card keeps its verdict per
criterion (match, near, differs, open). When none fits, the nearest card (fewest differences,
then most criteria matched, then the one stating most about itself, then best score) is named
with what it is and what the request asks for that it lacks (core.planning.nearest).
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from core.datasets.datacards import Datacard
from core.datasets.layouts.types import TEMPLATE_OF_LAYOUT
from core.datasets.vocabulary import (BOX_WORDS, STOPWORDS, Intent, anatomy_ancestors, anatomy_of,
                                      canonical_anatomy, canonical_modality, mentions_anatomy,
                                      mentions_modality, modality_ancestors, modality_of,
                                      parse_request)
from core.planning.class_terms import class_terms
from core.planning.nearest import TASK_TEXT, nearest_sentence
from core.planning.words import GENERIC_CLASS_WORDS, norm, words

SEGMENT_GROUP = ("segmentation", "anomaly_detection")
CLOSE = 0.5   # a runner-up this close is named in the explanation: the user may have meant it


@dataclass
class Candidate:
    name: str
    score: float
    eligible: bool
    reasons: list[str]
    differences: list[str] = field(default_factory=list)
    summary: str = ""
    # per criterion (task, output, modality, anatomy, dimension, classes, available):
    # "match", "near" (compatible, fewer points), "differs" or "open" (the card states none)
    criteria: dict[str, str] = field(default_factory=dict)
    target: str = ""     # the card's target the request binds (core.planning.targets)


@dataclass
class _Judgement:
    score: float = 0.0
    specific: int = 0      # matches beyond the task: modality, anatomy, specific classes
    reasons: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    untied: list[str] = field(default_factory=list)  # fields the card leaves open
    criteria: dict[str, str] = field(default_factory=dict)

    def add(self, points: float, reason: str, specific: bool = False,
            criterion: str = "", verdict: str = "match") -> None:
        self.score += points
        self.specific += int(specific)
        self.reasons.append(reason)
        if criterion:
            self.criteria[criterion] = verdict

    def rule_out(self, reason: str, difference: str, criterion: str = "") -> None:
        self.reasons.append(reason)
        self.differences.append(difference)
        if criterion:
            self.criteria[criterion] = "differs"


def card_summary(card: Datacard) -> str:
    return (f"{'/'.join(card.tasks) or 'no task'}, {card.modality or 'no modality'}, "
            f"{card.anatomy or 'no anatomy'}, {card.dimension or 'dimension not stated'}")


def _card_text(card: Datacard) -> str:
    return f"{card.name} {card.description} {' '.join(card.classes)}"


def _check_task(intent: Intent, card: Datacard, j: _Judgement) -> None:
    if not intent.task:
        return
    accepted = {intent.task} | (set(SEGMENT_GROUP) if intent.task in SEGMENT_GROUP else set())
    offered = [t for t in card.tasks if t in accepted]
    if not offered:
        j.rule_out(f"task mismatch: request asks for {intent.task}, card offers "
                   f"{', '.join(card.tasks) or 'no task'}",
                   f"task differs (request {intent.task}, card "
                   f"{', '.join(card.tasks) or 'none'})", "task")
        return
    j.add(3.0, f"offers the requested task ({intent.task})", criterion="task")
    if intent.output not in ("boxes", "masks"):
        return
    layout_template = TEMPLATE_OF_LAYOUT.get(card.label_source, "")
    has_boxes = layout_template == "detection" or (
        not layout_template and bool(re.search(BOX_WORDS, card.description.lower())))
    if intent.output == "boxes":
        if has_boxes:
            j.add(1.0, "has bounding boxes (trains the detection template)", criterion="output")
        else:
            j.add(-1.0, "has masks, not boxes: a segmentation model would be trained (boxes "
                        "can be read from its masks)", criterion="output", verdict="near")
    elif has_boxes:
        j.rule_out("output mismatch: request asks for outlines (masks), card has only "
                   "bounding boxes",
                   "output differs (request masks/outlines, card has bounding boxes only)",
                   "output")


def _check_modality(intent: Intent, card: Datacard, j: _Judgement) -> None:
    wanted = intent.modality
    if not wanted:
        return
    stated = canonical_modality(card.modality) if card.modality.strip() else ""
    if stated:
        if stated == wanted:
            j.add(2.0, f"modality {card.modality} matches", specific=True, criterion="modality")
        elif wanted in modality_ancestors(stated) or stated in modality_ancestors(wanted):
            j.add(1.5, f"modality {card.modality} is compatible with {wanted} (a subtype)",
                  specific=True, criterion="modality", verdict="near")
        else:
            j.rule_out(f"modality mismatch: request {wanted}, card {card.modality}",
                       f"modality differs (request {wanted}, card {card.modality})", "modality")
        return
    _judge_unstated(j, "modality", wanted, _card_text(card), mentions_modality, modality_of,
                    "its name or description names", "")


def _judge_unstated(j: _Judgement, field_name: str, wanted: str, text: str, mentions, named_in,
                    named_by: str, the: str) -> None:
    """A card that states no ``field_name`` (modality or anatomy): tied by its text naming the
    wanted one, ruled out when its text names another, left untied otherwise."""
    if mentions(text, wanted):
        j.add(1.5, f"states no {field_name}, but {named_by} {wanted}", specific=True,
              criterion=field_name, verdict="near")
    elif described := named_in(text):
        j.rule_out(f"{field_name} mismatch: request {wanted}, the card's description names "
                   f"{described}", f"{field_name} differs (request {wanted}, card's "
                   f"description names {described})", field_name)
    else:
        j.criteria[field_name] = "open"
        j.untied.append(f"the card states no {field_name} and its description does not name "
                        f"{the}{wanted}")


def _check_anatomy(intent: Intent, card: Datacard, j: _Judgement) -> None:
    wanted = intent.anatomy
    if not wanted:
        return
    stated = canonical_anatomy(card.anatomy) if card.anatomy.strip() else ""
    text = _card_text(card)
    if stated:
        if stated == wanted:
            j.add(2.0, f"anatomy {card.anatomy} matches", specific=True, criterion="anatomy")
        elif wanted in anatomy_ancestors(stated):
            j.add(1.5, f"anatomy {card.anatomy} lies within the requested {wanted}",
                  specific=True, criterion="anatomy", verdict="near")
        elif stated in anatomy_ancestors(wanted) and mentions_anatomy(text, wanted):
            j.add(1.5, f"anatomy {card.anatomy} contains the {wanted}, which its classes or "
                       "description name", specific=True, criterion="anatomy", verdict="near")
        elif stated in anatomy_ancestors(wanted):
            j.rule_out(f"anatomy mismatch: request {wanted}, card {card.anatomy} without the "
                       f"{wanted} in its classes or description",
                       f"anatomy differs (request {wanted}, card {card.anatomy}, whose classes "
                       f"and description do not name the {wanted})", "anatomy")
        else:
            j.rule_out(f"anatomy mismatch: request {wanted}, card {card.anatomy}",
                       f"anatomy differs (request {wanted}, card {card.anatomy})", "anatomy")
        return
    _judge_unstated(j, "anatomy", wanted, text, mentions_anatomy, anatomy_of,
                    "its name, classes or description name the", "the ")


def _check_dimension(intent: Intent, card: Datacard, j: _Judgement) -> None:
    if not (intent.dimension and card.dimension):
        return
    if intent.dimension == card.dimension:
        j.add(0.5, f"dimension {card.dimension} matches", criterion="dimension")
    elif intent.dimension == "3D":
        j.rule_out(f"dimension mismatch: request 3D, card {card.dimension}",
                   f"dimension differs (request 3D, card {card.dimension})", "dimension")
    else:  # 2D slices can be taken from volumes
        j.add(-0.5, f"dimension differs (card is {card.dimension})", criterion="dimension",
              verdict="near")


def _check_classes(intent: Intent, card: Datacard, j: _Judgement) -> None:
    """Classes the request names, by their names or the spelled-out forms the description
    gives their codes (``AD`` = "Alzheimer's disease"). Points for the share of the card's
    classes named, and a little for every request word they cover, so that of two cards
    naming all their classes the one covering more of the request ranks first."""
    request_words = words(" ".join(intent.words))
    stop = {norm(w) for w in STOPWORDS}
    named, generic, covered = [], [], set()
    for name in card.classes:
        for term in class_terms(name, card.description):
            parts = {norm(w) for w in re.findall(r"[a-z][a-z0-9]{2,}", term.lower())} - stop
            if not parts or not parts <= request_words:
                continue
            negated = re.match(r"(?:no|not|without)\s", term.lower().strip())  # "no tumour"
            (generic if negated or parts <= GENERIC_CLASS_WORDS else named).append(name)
            covered |= parts
            break
    if named:
        j.add(2.0 * len(named) / max(len(card.classes), 1) + 1.0
              + min(0.5, 0.05 * len(covered - GENERIC_CLASS_WORDS)),
              f"classes named in the request: {', '.join(named)}", specific=True,
              criterion="classes")
    if generic:
        j.add(0.25, f"generic classes named ({', '.join(generic)}), which alone tie no card")
    desc_words = words(card.description)
    ignored = stop | GENERIC_CLASS_WORDS
    shared = sorted((request_words & desc_words) - ignored)
    if shared:  # a hundredth per word past the cap: the closer description breaks a tie
        j.add(min(1.0, 0.25 * len(shared)) + 0.01 * len(shared),
              f"description shares: {', '.join(shared[:6])}")


def score_card(intent: Intent, card: Datacard, available: bool) -> Candidate:
    j = _Judgement()
    for check in (_check_task, _check_modality, _check_anatomy, _check_dimension,
                  _check_classes):
        check(intent, card, j)
    named_class = any(r.startswith("classes named") for r in j.reasons)
    if j.untied and not named_class:
        for what in j.untied:
            j.rule_out(f"untied: {what}, and no specific class is named", what)
    if not j.differences and j.specific == 0:
        j.rule_out("nothing ties the card to the request's modality, anatomy or classes",
                   "nothing specific ties it to the request (no modality, anatomy or specific "
                   "class in common)")
    if not available:
        j.rule_out("unavailable: its dataset folder does not exist on this machine",
                   "its dataset folder does not exist on this machine", "available")
    return Candidate(card.name, round(j.score, 3), not j.differences, j.reasons,
                     j.differences, card_summary(card), j.criteria)


def _stated(card: Datacard) -> int:
    return sum(bool(v) for v in (card.tasks, card.modality.strip(), card.anatomy.strip(),
                                 card.dimension))


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _no_fit(intent: Intent, nearest_text: str) -> str:
    if not (intent.task or intent.modality or intent.anatomy):
        return ("No dataset fits: the request names no task (classify, segment, detect "
                "anomalies, draw boxes, write reports) and no modality, anatomy or class that a "
                "registered dataset has.")
    what = "this request"
    if intent.task:
        task = TASK_TEXT.get(intent.task, intent.task)
        what = f"{_article(task)} {task} request"
        if intent.output == "boxes":
            what += " (bounding boxes)"
    text = (f"No registered dataset fits {what}"
            f"{' on ' + intent.modality if intent.modality else ''}"
            f"{' of the ' + intent.anatomy if intent.anatomy else ''}"
            f"{' in ' + intent.dimension if intent.dimension else ''}.")
    if nearest_text:
        text += " " + nearest_text
    return text + (" Register a dataset of the requested kind on the Datasets page, with a "
                   "datacard that states its task, modality, anatomy and dimension, or reword "
                   "the request if the nearest dataset was meant.")


def _nearest(scored: list[tuple[Candidate, Datacard]]) -> tuple[Candidate, Datacard]:
    """Fewest differences; then most criteria matched; then the card stating most about
    itself; then the best score."""
    return min(scored, key=lambda pair: (
        len(pair[0].differences), -sum(v == "match" for v in pair[0].criteria.values()),
        -_stated(pair[1]), -pair[0].score, pair[0].name))


def rank_datacards(request: str, cards: list[tuple[Datacard, bool]]) -> dict:
    """Rank (card, available) pairs. Returns the choice (or none), every candidate's reasons
    and, when none fits, the nearest card and how it differs."""
    from core.planning.targets import best_target
    intent = parse_request(request)
    scored = []
    for card, available in cards:
        candidate, target = best_target(intent, card, available, score_card, request)
        candidate.name, candidate.target = card.name, target
        scored.append((candidate, card))
    candidates = sorted((c for c, _ in scored), key=lambda c: (-int(c.eligible), -c.score, c.name))
    chosen = candidates[0] if candidates and candidates[0].eligible else None
    nearest, nearest_text = None, ""
    if chosen:
        explanation = f"Chose {chosen.name} (score {chosen.score}): " + "; ".join(chosen.reasons)
        close = [c for c in candidates[1:] if c.eligible and chosen.score - c.score < CLOSE]
        if close:
            explanation += (". Close behind: " + ", ".join(f"{c.name} (score {c.score})"
                                                          for c in close[:3])
                            + "; the request fits it almost as well: change the dataset at "
                            "approval if it was meant")
    else:
        if scored and (intent.task or intent.modality or intent.anatomy):
            nearest, card = _nearest(scored)
            nearest_text = nearest_sentence(intent, request, card, nearest.criteria,
                                            nearest.differences)
            here = [pair for pair in scored if pair[0].criteria.get("available") != "differs"]
            if nearest.criteria.get("available") == "differs" and here:
                nearest_here, card = _nearest(here)  # one whose images are on this server
                nearest_text += " " + nearest_sentence(
                    intent, request, card, nearest_here.criteria, nearest_here.differences,
                    "Nearest available here")
        explanation = _no_fit(intent, nearest_text)
    return {"intent": asdict(intent), "chosen": chosen.name if chosen else None,
            "target": chosen.target if chosen else "",
            "explanation": explanation, "candidates": [asdict(c) for c in candidates],
            "nearest": nearest.name if nearest else None,
            "differences": list(nearest.differences) if nearest else [],
            "nearest_text": nearest_text}
