"""Words as the Task Manager compares them: one spelling per word (lower case, singular, US
spelling of ``haemorrhage``/``tumour``), the content words of a text, and the class words that
say nothing about which dataset is meant. Shared by matching and nearest.

May import: nothing of the project.
"""
from __future__ import annotations

import re

# class words that say nothing about which dataset is meant: they never tie a card
GENERIC_CLASS_WORDS = {
    "normal", "abnormal", "healthy", "unhealthy", "positive", "negative", "pos", "neg",
    "control", "other", "none", "benign", "malignant", "finding", "background", "unknown",
    "disease", "diseased", "present", "absent", "yes", "misc", "rest", "class", "label",
    "non", "not", "without"}


# one word for what clinicians write several ways (after the spelling rules of ``norm``)
SYNONYMS = {"bleed": "hemorrhage", "bleeding": "hemorrhage", "hemorrhagic": "hemorrhage",
            "haemorrhagic": "hemorrhage", "ich": "hemorrhage", "nevi": "nevu",
            "mole": "nevu", "cardiomegalie": "cardiomegaly",
            "enlarged-heart": "cardiomegaly", "pneumothoraxe": "pneumothorax", "ptx": "pneumothorax",
            "neoplasm": "tumor", "nodular": "nodule", "fractured": "fracture", "broken": "fracture", "opacitie": "opacity",
            "opacification": "opacity", "consolidated": "consolidation",
            "atelectatic": "atelectasi", "emphysematou": "emphysema", "edematou": "edema"}


def norm(word: str) -> str:
    """One spelling per word: lower case, singular, ``haemorrhage``/``tumour`` as in US."""
    word = word.lower().strip()
    word = word[:-1] if word.endswith("s") and len(word) > 3 else word
    word = word.replace("ae", "e").replace("oe", "e")
    word = word[:-3] + "or" if word.endswith("our") and len(word) > 4 else word
    return SYNONYMS.get(word, word)


def words(text: str) -> set[str]:
    """Content words of ``text``, hyphenated words also split into their parts."""
    out = set()
    for word in re.findall(r"[a-z][a-z0-9-]{2,}", text.lower()):
        out.add(norm(word))
        out.update(norm(part) for part in word.split("-") if len(part) >= 3)
    return out
