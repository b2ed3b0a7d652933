"""The request binds a target: of the targets a datacard lists (core.datasets.layouts
.target_list), the one the request asks for.

Each target is judged as a card of its own (its task, classes, layout and dimension over the
card's modality, anatomy and description) by core.planning.matching's checks, plus the
target's field name: "classify the tumour grade" binds the field ``neoplasm_histologic_grade``
even when its values (``G2``/``G3``) are too short to be read as words. Verbs are read against
what the data offers: "detect X" without boxes or outlines asked for is served by a diagnosis
target of X (image-level labels), a little below a target with boxes or masks of X.

May import: core.datasets.datacards, core.datasets.vocabulary, core.planning (words).
"""
from __future__ import annotations

import re
from dataclasses import replace

from core.datasets.datacards import Datacard
from core.datasets.vocabulary import STOPWORDS, Intent
from core.planning.words import GENERIC_CLASS_WORDS, norm, words

IMAGE_LEVEL = -0.5     # "detect X" served by image-level labels of X
FIELD_POINTS = 1.5     # the request names the target's field
NAMED_WORD_POINTS = 0.2   # each further word of the field's name or meaning the request says


def target_card(card: Datacard, target: dict) -> Datacard:
    """The card as it would read with only ``target``."""
    update = {"tasks": [target.get("task") or (card.tasks or [""])[0]],
              "classes": list(target.get("classes") or []),
              "label_source": target.get("layout") or card.label_source}
    if target.get("dimension"):
        update["dimension"] = target["dimension"]
    return card.model_copy(update=update)


def field_words(target: dict, description: str = "") -> set[str]:
    """The words of the target's field name (``probSevere`` -> prob, severe) and of the
    description's clause that says what the field means ("probSevere means intubation or death
    within one month")."""
    raw = str(target.get("name") or "")
    name = re.sub(r"([a-z])([A-Z])", r"\1 \2", raw).replace("_", " ")
    found = words(name)
    if description and len(raw) >= 3:
        pattern = re.compile(r"(?<![\w])" + re.escape(raw) + r"(?![\w])", re.I)
        for clause in re.split(r"[.;\n]+(?:\s|$)", description):
            if pattern.search(clause):
                found |= words(clause)
    return found - {norm(w) for w in STOPWORDS} - GENERIC_CLASS_WORDS


def short_classes_named(intent: Intent, target: dict) -> list[str]:
    """Class values too short for the word check (``G2``, ``T1``, ``AD``) that the request
    writes as they are."""
    said = {w.lower() for w in re.findall(r"[A-Za-z0-9]+", " ".join(intent.words))} | \
        set(intent.words)
    return [c for c in target.get("classes") or []
            if len(c) <= 3 and c.lower() in said and c.lower() not in GENERIC_CLASS_WORDS]


def target_intent(intent: Intent, target: dict) -> tuple[Intent, float, str]:
    """The intent a target is judged by, its extra points and why."""
    if intent.task == "anomaly_detection" and not intent.output and \
            target.get("task") == "diagnosis":
        return (replace(intent, task="diagnosis"), IMAGE_LEVEL,
                "the request says detect; this target has image-level labels (diagnosis)")
    return intent, 0.0, ""


def bind_bonus(intent: Intent, request_words: set[str], target: dict,
               description: str = "") -> tuple[float, list[str]]:
    points, reasons = 0.0, []
    own = field_words(target, description)
    named = own & request_words
    if named:
        share = len(named) / max(1, len(own))
        points += FIELD_POINTS * max(share, 0.5) + NAMED_WORD_POINTS * (len(named) - 1)
        reasons.append(f"target field {target.get('name')!r} named in the request "
                       f"({', '.join(sorted(named))})")
    short = short_classes_named(intent, target)
    if short:
        points += 1.0
        reasons.append(f"classes {', '.join(short)} named in the request")
    return points, reasons


def best_target(intent: Intent, card: Datacard, available: bool, score_card, request: str):
    """(candidate, target id or "") of the card's best-fitting target; the card itself when
    it lists none."""
    targets = [t for t in getattr(card, "targets", None) or [] if isinstance(t, dict)]
    if not targets:
        return score_card(intent, card, available), ""
    request_words = words(request) | {w.lower() for w in intent.words}
    best = None
    for rank, target in enumerate(targets):
        judged, extra, why = target_intent(intent, target)
        cand = score_card(judged, target_card(card, target), available)
        bonus, reasons = bind_bonus(intent, request_words, target,
                                    str(getattr(card, "description", "") or ""))
        if bonus and not cand.eligible and cand.differences and all(
                d.startswith("nothing specific") for d in cand.differences):
            cand.eligible, cand.differences = True, []   # the field name ties it
        cand.score = round(cand.score + extra + bonus - 0.001 * rank, 3)
        cand.reasons += ([why] if why else []) + reasons + [f"target: {target.get('name')}"]
        key = (cand.eligible, cand.score)
        if best is None or key > best[0]:
            best = (key, cand, target.get("id", ""))
    return best[1], best[2]
