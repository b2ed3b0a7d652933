"""The Task Manager's judgement, made deterministic: read a request, score every datacard.

Scoring (higher is better), each part explained in words for the user:

* task: the request's task must be one the card offers (organ and lesion segmentation cards
  serve each other's requests) — a mismatch rules the card out;
* modality and anatomy: a stated mismatch rules the card out; a match adds points;
* classes: class names of the card named in the request add points;
* description: shared content words add a little;
* an unavailable card (its folder does not exist) is never chosen, and the reason says so.

A card is chosen only when it matches the task (when the request states one) and at least one of
modality, anatomy or classes.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from core.datasets.datacards import Datacard
from core.datasets.vocabulary import (ANATOMY_PARENTS, ANATOMY_WORDS, MODALITY_WORDS, STOPWORDS,
                                      Intent, parse_request)


@dataclass
class Candidate:
    name: str
    score: float
    eligible: bool
    reasons: list[str]


def _norm(word: str) -> str:
    word = word.lower().strip()
    return word[:-1] if word.endswith("s") and len(word) > 3 else word


def _canonical_anatomy(value: str) -> str:
    value = value.lower().strip()
    for anatomy, pattern in ANATOMY_WORDS.items():
        if value == anatomy or re.search(pattern, value):
            return anatomy
    return ANATOMY_PARENTS.get(value, value)


def _canonical_modality(value: str) -> str:
    value = value.lower().strip()
    for modality, pattern in MODALITY_WORDS.items():
        if value == modality.lower() or re.search(pattern, value):
            return modality
    return value


def score_card(intent: Intent, card: Datacard, available: bool) -> Candidate:
    reasons: list[str] = []
    score = 0.0
    eligible = True
    specific = 0  # matches beyond the task
    if intent.task:
        accepted = {intent.task} | ({"segmentation", "anomaly_detection"}
                                    if intent.task in ("segmentation", "anomaly_detection")
                                    else set())
        if set(card.tasks) & accepted:
            score += 3.0
            reasons.append(f"offers the requested task ({intent.task})")
        else:
            eligible = False
            reasons.append(f"task mismatch: request asks for {intent.task}, card offers "
                           f"{', '.join(card.tasks) or 'no task'}")
    if intent.modality and card.modality:
        if _canonical_modality(card.modality) == intent.modality:
            score += 2.0
            specific += 1
            reasons.append(f"modality {card.modality} matches")
        else:
            eligible = False
            reasons.append(f"modality mismatch: request {intent.modality}, card {card.modality}")
    if intent.anatomy and card.anatomy:
        if _canonical_anatomy(card.anatomy) == intent.anatomy:
            score += 2.0
            specific += 1
            reasons.append(f"anatomy {card.anatomy} matches")
        else:
            eligible = False
            reasons.append(f"anatomy mismatch: request {intent.anatomy}, card {card.anatomy}")
    if intent.dimension and card.dimension:
        if intent.dimension == card.dimension:
            score += 0.5
            reasons.append(f"dimension {card.dimension} matches")
        else:
            score -= 0.5
            reasons.append(f"dimension differs (card is {card.dimension})")
    request_words = {_norm(w) for w in intent.words}
    named = [c for c in card.classes if _norm(c) in request_words or c.lower() in request_words]
    if named:
        score += 2.0 * len(named) / max(len(card.classes), 1) + 1.0
        specific += 1
        reasons.append(f"classes named in the request: {', '.join(named)}")
    desc_words = {_norm(w) for w in re.findall(r"[a-z][a-z0-9-]{2,}", card.description.lower())}
    shared = sorted((request_words & desc_words) - {_norm(w) for w in STOPWORDS})
    if shared:
        score += min(1.0, 0.25 * len(shared))
        reasons.append(f"description shares: {', '.join(shared[:6])}")
    if eligible and specific == 0:
        eligible = False
        reasons.append("nothing ties the card to the request's modality, anatomy or classes")
    if not available:
        eligible = False
        reasons.append("unavailable: its dataset folder does not exist on this machine")
    return Candidate(card.name, round(score, 3), eligible, reasons)


def rank_datacards(request: str, cards: list[tuple[Datacard, bool]]) -> dict:
    """Rank (card, available) pairs. Returns the choice (or none) and every candidate's reasons."""
    intent = parse_request(request)
    candidates = sorted((score_card(intent, card, available) for card, available in cards),
                        key=lambda c: (-int(c.eligible), -c.score, c.name))
    chosen = candidates[0] if candidates and candidates[0].eligible else None
    if chosen:
        explanation = f"Chose {chosen.name} (score {chosen.score}): " + "; ".join(chosen.reasons)
    elif not intent.task:
        explanation = ("No dataset fits: the request names no task (classify, segment, detect "
                       "anomalies, write reports) and no modality, anatomy or class that a "
                       "registered dataset has.")
    else:
        explanation = (f"No registered dataset fits a {intent.task} request"
                       f"{' on ' + intent.modality if intent.modality else ''}"
                       f"{' of the ' + intent.anatomy if intent.anatomy else ''}. "
                       "Register a dataset with a datacard that describes it.")
    return {"intent": asdict(intent), "chosen": chosen.name if chosen else None,
            "explanation": explanation, "candidates": [asdict(c) for c in candidates]}
