"""What a card's class names stand for, read from its description: class codes and
abbreviations (``AD``, ``CN``, ``NCP``) are spelled out in the words a clinician would type in a
request ("Alzheimer's disease", "cognitively normal", "novel coronavirus pneumonia").

Two forms are read, both common in dataset documentation:

* a definition: ``CN = cognitively normal``, ``MCI: mild cognitive impairment``,
  ``NCP - novel coronavirus pneumonia`` (up to the next comma, semicolon, full stop or bracket);
* the code with its long form in brackets: ``NCP (novel coronavirus pneumonia)``;
* a long form with the code in brackets: ``Alzheimer's disease (AD)``, ``cognitively normal
  control (CN)``: the nearest run of words before the bracket whose initials are the code's
  letters, and the nearest run ending at the bracket whose initials hold them in order from
  the first (the idea of the Schwartz-Hearst abbreviation finder, by word initials).

Nothing is guessed beyond what the description writes; a class without either form is its own
name only.

May import: nothing of the project.
"""
from __future__ import annotations

import re

MAX_WORDS = 6
WORD = re.compile(r"[A-Za-z][A-Za-z0-9'\-]*")


def _is_code(name: str) -> bool:
    """A short code or abbreviation: worth looking up (``AD``, ``MCI``, ``NCP``, ``CP``)."""
    return bool(re.fullmatch(r"[A-Za-z][A-Za-z0-9]{0,5}", name)) and \
        (name.isupper() or len(name) <= 3)


def _initials_hold(words: list[str], code: str) -> bool:
    """The words' initials start with the code's first letter and hold its letters in order."""
    letters = [c.lower() for c in code if c.isalpha()]
    initials = [w[0].lower() for w in words]
    if not letters or not initials or initials[0] != letters[0]:
        return False
    k = 0
    for initial in initials:
        if k < len(letters) and initial == letters[k]:
            k += 1
    return k == len(letters)


def _long_forms_before(before: str, code: str) -> list[str]:
    """Long forms of ``code`` among the last words before its bracket: the nearest run whose
    initials are exactly the code's letters ("cognitively normal" in "a cognitively normal
    control (CN)"), then the nearest run ending at the bracket whose initials hold them."""
    before = re.split(r"[().;:!?\n]", before)[-1]   # within the bracket's own clause
    words = WORD.findall(before)[-MAX_WORDS:]
    letters = [c.lower() for c in code if c.isalpha()]
    found = []
    for end in range(len(words), 0, -1):
        start = end - len(letters)
        if start >= 0 and [w[0].lower() for w in words[start:end]] == letters:
            found.append(" ".join(words[start:end]))
            break
    for start in range(len(words) - 1, -1, -1):   # nearest first: the shortest long form
        span = words[start:]
        if len(span) >= len(letters) and _initials_hold(span, code):
            found.append(" ".join(span))
            break
    return found


def class_terms(name: str, description: str) -> list[str]:
    """The class's own name, then every spelled-out form the description gives it."""
    terms = [name]
    if not description or not _is_code(name.strip()):
        return terms
    code = re.escape(name.strip())
    for match in re.finditer(rf"(?<![\w-]){code}\s*(?:=|:|\s-|–|—)\s*([^,;.()\n=]{{3,60}})",
                             description):
        phrase = match[1].strip().strip("'\"")
        if WORD.search(phrase) and phrase not in terms:
            terms.append(phrase)
    for match in re.finditer(rf"(?<![\w-]){code}\s*\(([^()\n]{{3,60}})\)", description):
        phrase = match[1].strip()
        if WORD.search(phrase) and phrase not in terms:
            terms.append(phrase)
    for match in re.finditer(rf"\(\s*{code}\s*\)", description):
        for phrase in _long_forms_before(description[max(0, match.start() - 120):
                                                     match.start()], name.strip()):
            if phrase not in terms:
                terms.append(phrase)
    return terms
