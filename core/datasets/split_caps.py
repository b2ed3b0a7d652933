"""Sample caps and class balance read from the datacard description, deterministically:
"use at most 1000 samples for training and 200 for testing, keep classes balanced", "at most 500
images", "max 50 per class", "balanced classes" (:func:`parse_caps`). The split applies them
(core.datasets.splitting.apply_caps).

May import: nothing of the project."""
from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class SplitCaps:
    """Limits on how many samples the index may use, read from the datacard description."""
    train: int | None = None       # at most this many training samples
    test: int | None = None        # at most this many test samples
    total: int | None = None       # at most this many samples in all (shared by the sides)
    per_class: int | None = None   # at most this many samples of each class (both sides)
    balanced: bool = False         # the same number of samples of every class on each side
    sources: list[dict] = field(default_factory=list)  # {"cap", "value", "sentence"}

    def active(self) -> bool:
        return self.balanced or any(v is not None for v in
                                    (self.train, self.test, self.total, self.per_class))

    def to_json(self) -> dict:
        return {"train": self.train, "test": self.test, "total": self.total,
                "per_class": self.per_class, "balanced": self.balanced,
                "from": self.sources}


_CUE = re.compile(r"\b(?:at\s+most|up\s+to|no\s+more\s+than|not\s+more\s+than|maximum(?:\s+of)?|"
                  r"max\.?|limit(?:ed|ing)?|cap(?:ped)?\s+(?:at|to)|use\s+only|only\s+use|"
                  r"subsample(?:d)?\s+to)\b|^\s*(?:please\s+)?(?:only\s+)?"
                  r"(?:use|sample|subsample|take|select|pick|keep)\b", re.I)
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\s*k\b)?", re.I)
_UNIT = r"(?:samples?|images?|cases?|scans?|examples?|studies|study|volumes?|slices?|files?|" \
        r"pictures?|radiographs?|x-?rays?)"
_SIDE = r"(?P<side>train(?:ing)?|test(?:ing)?|val(?:idation)?)"
_TAIL_SIDE = re.compile(rf"^\s*(?:{_UNIT}\s*)?(?:(?:for|in|from|of|as)\s+(?:the\s+)?)?{_SIDE}\b",
                        re.I)
_TAIL_SIDE_FIRST = re.compile(rf"^\s*{_SIDE}\s+{_UNIT}\b", re.I)
_TAIL_CLASS = re.compile(rf"^\s*(?:{_UNIT}\s*)?(?:per|for\s+each|of\s+each|from\s+each|each|a)\s+"
                         r"(?:class|label|category|categories|diagnosis|group)\b", re.I)
_TAIL_UNIT = re.compile(rf"^\s*{_UNIT}\b", re.I)
_SIDE_BEFORE = re.compile(rf"\b{_SIDE}\b", re.I)
_TAIL_BARE = re.compile(r"^\s*(?:$|[,)]|and\b|or\b|in\s+(?:all|total)\b)", re.I)
_BALANCED = re.compile(r"\b(?:balanc(?:e|ed|ing)\b|equal\s+(?:number|numbers|count|counts)\s+"
                       r"(?:of\s+\w+\s+)?(?:per|for\s+each|of\s+each|in\s+each)\s+class)", re.I)
_NOT_BALANCED = re.compile(r"\b(?:not|never|no\s+need\s+to|don'?t|do\s+not)\s+(?:\w+\s+){0,2}"
                           r"balanc|\bbalanc\w*(?:\s+\w+){0,3}\s+or\b", re.I)  # or: an option


def _sentences(text: str) -> list[str]:
    """Split on sentence ends (not on decimal points or '1,000')."""
    parts = re.split(r"(?<!\d)[.;!?\n]+|[.;!?\n]+(?!\d)", text)
    return [p.strip() for p in parts if p and p.strip()]


def _number(match: re.Match) -> int:
    value = int(match.group(1).replace(",", ""))
    return value * 1000 if match.group(2) else value


def parse_caps(description: str) -> SplitCaps:
    """Read sample caps and class balance from free text, deterministically.

    A number counts as a cap only in a sentence that asks for one ("at most", "up to", "max",
    "no more than", "limit to", "use ...") and only after that cue; what follows the number says
    what it limits: "... for training" / "training samples" (train), "... for testing" (test),
    "... per class" (per class), a plain unit such as "images" (total). Other numbers
    ("from 300 patients", "3 classes") are ignored. "balanced classes" / "keep classes balanced"
    asks for balance. Each cap keeps the sentence it came from."""
    caps = SplitCaps()
    for sentence in _sentences(description or ""):
        if _BALANCED.search(sentence) and not _NOT_BALANCED.search(sentence):
            if not caps.balanced:
                caps.sources.append({"cap": "balanced", "value": True, "sentence": sentence})
            caps.balanced = True
        cue = _CUE.search(sentence)
        if not cue:
            continue
        cursor, previous_side = cue.end(), ""
        for match in _NUMBER.finditer(sentence, cue.end()):
            tail = sentence[match.end():match.end() + 60]
            before = _SIDE_BEFORE.search(sentence[cursor:match.start()])
            value = _number(match)
            side_match = _TAIL_SIDE.match(tail) or _TAIL_SIDE_FIRST.match(tail)
            unit_or_bare = _TAIL_UNIT.match(tail) or _TAIL_BARE.match(tail)
            cursor = match.end() + (side_match.end() if side_match else 0)
            if _TAIL_CLASS.match(tail):
                kind = "per_class"
            elif side_match or (before and unit_or_bare):
                side = (side_match or before).group("side").lower()
                kind = "train" if side.startswith("train") else \
                    "test" if side.startswith("test") else "val"
                previous_side = kind
            elif unit_or_bare:
                kind = "total"
            else:
                continue  # "3 classes", "from 300 patients", "aged 40": not a cap
            if kind == "val" or value <= 0:
                continue  # validation comes out of training; it is not capped here
            if kind == "total" and previous_side:
                continue  # "1000 for training and 200 images ..." is ambiguous: ignore it
            current = getattr(caps, kind)
            setattr(caps, kind, value if current is None else min(current, value))
            caps.sources.append({"cap": kind, "value": value, "sentence": sentence})
    return caps


def as_caps(caps: SplitCaps | str | None) -> SplitCaps:
    if caps is None:
        return SplitCaps()
    return parse_caps(caps) if isinstance(caps, str) else caps
