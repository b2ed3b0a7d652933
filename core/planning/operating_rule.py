"""The operating-point rule a request or a plan states (issue 13): Youden's J by default, or a
target sensitivity or specificity ("at 95 % sensitivity", "specificity 0.9"), and which of two
classes a decision detects. The Task Manager writes the rule into the plan, the user may edit it
at approval, and the evaluator (core.evaluation.operating_point) chooses the threshold by it.

May import: the standard library.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

NEGATIVE_WORDS = re.compile(r"^(?:no\b|not\b|non[- ]|normal|healthy|negative|benign|control|"
                            r"absent|none|clear|cn$|hc$)", re.I)


@dataclass(frozen=True)
class Rule:
    kind: str = "youden"          # "youden", "sensitivity" or "specificity"
    target: float | None = None   # the target rate for "sensitivity" / "specificity"

    def text(self) -> str:
        if self.kind == "youden":
            return "Youden's J (sensitivity + specificity - 1) on validation"
        return f"{self.kind} >= {self.target:.0%} on validation"

    def short(self) -> str:
        """What a plan stores and a form shows: ``youden`` or ``95% sensitivity``."""
        return "youden" if self.kind == "youden" else f"{self.target * 100:g}% {self.kind}"


class OperatingPointError(ValueError):
    """The rule cannot be met or the data cannot give a threshold; the message says why."""


def parse_rule(text: str | None) -> Rule:
    """``"at 95% sensitivity"``, ``"specificity 0.9"``, ``"youden"`` or nothing (Youden)."""
    if not text or not str(text).strip():
        return Rule()
    low = str(text).lower()
    match = re.search(r"(sensitivity|specificity|recall|tpr|tnr)\D{0,20}?(\d+(?:\.\d+)?)\s*(%?)",
                      low) or re.search(r"(\d+(?:\.\d+)?)\s*(%?)\s*(?:of\s+)?"
                                        r"(sensitivity|specificity|recall|tpr|tnr)", low)
    if not match:
        if "youden" in low or "balanced" in low:
            return Rule()
        raise OperatingPointError(f"cannot read an operating point from {text!r}; say e.g. "
                                  "'at 95% sensitivity', 'at 90% specificity' or 'youden'")
    groups = match.groups()
    word, number, percent = ((groups[0], groups[1], groups[2]) if groups[0][0].isalpha()
                             else (groups[2], groups[0], groups[1]))
    value = float(number) / (100.0 if percent or float(number) > 1 else 1.0)
    if not 0.0 < value <= 1.0:
        raise OperatingPointError(f"target {number}{percent} is not a rate between 0 and 100 %")
    kind = "specificity" if word in ("specificity", "tnr") else "sensitivity"
    return Rule(kind, value)


def rule_in_request(request: str) -> Rule | None:
    """The operating point a request asks for ("... at 95% sensitivity"), or None when it names
    none (or names one that cannot be read: the plan then shows Youden and the user can edit)."""
    if not re.search(r"sensitivity|specificity|recall|\btpr\b|\btnr\b", request or "", re.I):
        return None
    try:
        rule = parse_rule(request)
    except OperatingPointError:
        return None
    return rule if rule.kind != "youden" else None


def positive_index(names: list[str]) -> int:
    """Of two class names, the one a decision detects: the one that is not normal, healthy,
    negative, benign, control or "no …" (``NORMAL`` / ``PNEUMONIA`` -> 1); the second when
    neither or both are."""
    if len(names) != 2:
        raise OperatingPointError(f"a threshold decides between two classes, not {len(names)}")
    negative = [bool(NEGATIVE_WORDS.search(n.strip())) for n in names]
    return 0 if negative == [False, True] else 1
