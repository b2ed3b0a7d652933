"""A chat message that asks to score a trained model on another registered dataset ("test this
model on the Hospital B set", "evaluate <model> on <dataset>", "how well does my model do on
Hospital B?"), read deterministically: no LLM sees it.

A message is such a request when it has an evaluation verb (test, evaluate, validate, assess,
score, check, perform, generalise, "how well does ... do"), refers to a model (this/the/my/latest
model, "it", a model's id or name, or "external validation") and asks to build nothing (no build,
train, create, ... verb). The dataset is the registered one it names — in full, or by words of
its name that no other registered dataset shares ("the Hospital B set" for "Hospital B chest
X-ray"). When two datasets are named, the one after "on", "against", "with", "using" or "in" is
the external set and the other names the model (the newest trained on it).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

EVAL = re.compile(r"\b(test|tests|testing|tested|evaluate|evaluating|evaluation|validate|"
                  r"validating|validation|assess|assessing|score|scoring|benchmark|check|"
                  r"checking|perform|performs|performance|generali[sz]es?|how\s+(?:well|good|"
                  r"accurate)\b.*\b(?:do|does|did|work|works|hold|holds))\b")
BUILD = re.compile(r"\b(build|building|train|training|retrain|make|create|develop|fit|"
                   r"fine\s*tune|finetune|classify|segment|detect|generate|write)\b")
MODEL_REF = re.compile(r"\b(model|models|classifier|network|net|it|external)\b")
BEFORE_EXTERNAL = re.compile(r"\b(on|against|with|using|in|to)\s+(?:the\s+|my\s+|our\s+)?$")
GENERIC = {"the", "a", "an", "of", "and", "set", "dataset", "data", "images", "image", "scans",
           "scan", "chest", "x", "ray", "xray", "xrays", "rays", "ct", "mri", "mr", "us",
           "2d", "3d", "cohort", "site",
           "diagnosis", "segmentation", "classification", "organs", "organ", "for", "with",
           "on", "in", "to", "from"}


@dataclass
class ExternalRequest:
    """``model``: a model id, or "" for the latest; ``dataset``: the registered name, or ""
    when the message names none (``problem`` then says so)."""
    model: str = ""
    dataset: str = ""
    problem: str = ""


def _norm(text: str) -> str:
    return " " + " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split()) + " "


def _spans(text: str, phrase: str) -> list[tuple[int, int]]:
    phrase = _norm(phrase)
    if phrase.strip() == "":
        return []
    return [(m.start(), m.start() + len(phrase)) for m in re.finditer(re.escape(phrase), text)]


def _mentions(text: str, names: list[str]) -> list[tuple[int, int, int, str]]:
    """(start, end, words matched, name) of each dataset the text names: its whole name, else
    its longest run of words with a distinctive word that no other name shares."""
    found = []
    for name in names:
        spans = _spans(text, name)
        if spans:
            found.append((*spans[0], 100, name))
            continue
        words = _norm(name).split()
        best = None
        for size in range(len(words), 0, -1):
            for i in range(len(words) - size + 1):
                gram = words[i:i + size]
                if all(w in GENERIC for w in gram):
                    continue
                phrase = " ".join(gram)
                if any(_spans(_norm(o), phrase) for o in names if o != name):
                    continue
                spans = _spans(text, phrase)
                if spans:
                    best = (*spans[0], size, name)
                    break
            if best:
                break
        if best:
            found.append(best)
    return found


def _blank(text: str, start: int, end: int) -> str:
    return text[:start] + " " * (end - start) + text[end:]


def parse_external_request(message: str, datasets: list[str],
                           models: list[dict]) -> ExternalRequest | None:
    """The external evaluation ``message`` asks for, or None when it asks for something else.
    ``datasets``: registered names; ``models``: the store's model rows (newest first)."""
    text = _norm(message)
    model_id = ""
    for model in models:  # an id or a name the message names (longest name first)
        for label in (model["id"], model.get("name") or "", model.get("former_name") or ""):
            spans = _spans(text, label) if label else []
            if spans and not model_id:
                model_id = model["id"]
                text = _blank(text, *spans[0])
    mentioned = sorted(_mentions(text, datasets))
    words = text
    for start, end, _, _ in mentioned:  # a dataset's name is no verb of the message
        words = _blank(words, start, end)
    if not EVAL.search(words) or BUILD.search(words) or not (model_id or MODEL_REF.search(words)):
        return None
    if len(mentioned) > 1:
        after = [m for m in mentioned if BEFORE_EXTERNAL.search(text[:m[0] + 1])]
        external = max(after or mentioned[-1:], key=lambda m: (m[2], m[0]))
        others = [m for m in mentioned if m[3] != external[3]]
        if not model_id and others:
            trained = [m for m in models if (m.get("dataset") or "").lower() == others[0][3]
                       .lower()]
            if trained:
                model_id = trained[0]["id"]
        return ExternalRequest(model_id, external[3])
    if mentioned:
        return ExternalRequest(model_id, mentioned[0][3])
    asked = re.search(r"\b(?:on|against|using)\s+(?:the\s+|my\s+|our\s+)?([a-z0-9][a-z0-9 ]*)",
                      text)
    if not asked:
        return None
    named = " ".join(asked.group(1).split()[:6])
    return ExternalRequest(model_id, "", f"no registered dataset is called like “{named}”; "
                                         f"registered: {', '.join(datasets) or 'none'}")
