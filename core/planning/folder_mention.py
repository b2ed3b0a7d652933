"""Folders named in a request's text ("build a pneumonia classifier from /data/cxr").

A mention is found where the request writes

* an absolute path (``/data/cxr``) or one under the user's home (``~/scans/knee``); unquoted, a
  path with spaces is read as far as the words after it still name an existing folder
  (``/data/my scans/knee``); quoted (``"…"``, ``'…'``, ``“…”``, ``‘…’``, backticks) it is
  read as written;
* a path relative to the app's datasets folder (``<home>/datasets``): ``./knee`` or
  ``../x`` always, ``uploads/knee`` (a word with a slash) or a quoted name only when that
  folder exists there: "pneumonia/normal" or "T1/T2" are words, not folders.

Only the text is read here (and whether a folder exists); what a mention may be used for is
decided by core.planning.request_folder with the folder safety rules.

May import: core.config.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

QUOTED = re.compile(r'"([^"\n]+)"|“([^”\n]+)”|‘([^’\n]+)’|`([^`\n]+)`'
                    r"|(?<![A-Za-z0-9])'([^'\n]+)'(?![A-Za-z0-9])")
EXPLICIT = re.compile(r"^(?:/(?=[^/\s])|~/|\.{1,2}/)")  # /x, ~/x, ./x, ../x
LEADING = "([{<\"'“‘`"
TRAILING = ")]}>\"'”’`.,;:!?"
JOIN_WORDS = 8   # an unquoted path may run over this many words (spaces in folder names)


@dataclass(frozen=True)
class FolderMention:
    written: str       # as the request writes it
    path: Path         # absolute, ``~`` expanded, not resolved (links are the safety check's)
    start: int         # where it is in the request
    end: int
    explicit: bool     # absolute, ``~`` or ``./``: meant as a path even when it does not exist


def as_path(written: str, datasets_dir: Path) -> Path:
    """The path a written mention means: ``~`` expanded, a relative one under the datasets
    folder."""
    path = Path(os.path.expanduser(written))
    return path if path.is_absolute() else Path(datasets_dir) / path


def _strip(text: str, start: int) -> tuple[str, int]:
    """The token without the punctuation around it, and where it now starts."""
    stripped = text.lstrip(LEADING)
    start += len(text) - len(stripped)
    return stripped.rstrip(TRAILING) if not stripped.endswith("/") else stripped, start


def _quoted(request: str, datasets_dir: Path) -> list[FolderMention]:
    found = []
    for match in QUOTED.finditer(request):
        group = next(i for i in range(1, 6) if match.group(i) is not None)
        written = match.group(group).strip()
        if not written or "\x00" in written:
            continue
        explicit = bool(EXPLICIT.match(written))
        path = as_path(written, datasets_dir)
        if explicit or os.path.isdir(path):  # os.path: a name too long is no folder
            found.append(FolderMention(written, path, match.start(), match.end(), explicit))
    return found


def _unquoted(text: str, datasets_dir: Path) -> list[FolderMention]:
    tokens = list(re.finditer(r"\S+", text))
    found, i = [], 0
    while i < len(tokens):
        written, start = _strip(tokens[i].group(), tokens[i].start())
        if not written or "\x00" in written:
            i += 1
            continue
        if EXPLICIT.match(written):
            best, end = written, start + len(written)
            last = i
            for j in range(i + 1, min(len(tokens), i + JOIN_WORDS)):
                longer, _ = _strip(text[start:tokens[j].end()], start)
                if os.path.isdir(as_path(longer, datasets_dir)):
                    best, end, last = longer, start + len(longer), j
            found.append(FolderMention(best, as_path(best, datasets_dir), start, end, True))
            i = last + 1
            continue
        if "/" in written and "://" not in written and not written.startswith(("/", "~")):
            path = as_path(written, datasets_dir)
            if os.path.isdir(path):
                found.append(FolderMention(written, path, start, start + len(written), False))
        i += 1
    return found


def find_folder_mentions(request: str, datasets_dir: Path) -> list[FolderMention]:
    """Every folder the request names, in the order written (see the module's docstring)."""
    request = request or ""
    quoted = _quoted(request, datasets_dir)
    blanked = list(request)
    for mention in quoted:  # a quoted path is not read again word by word
        blanked[mention.start:mention.end] = " " * (mention.end - mention.start)
    found = quoted + _unquoted("".join(blanked), datasets_dir)
    return sorted(found, key=lambda m: m.start)


def without_mentions(request: str, mentions: list[FolderMention]) -> str:
    """The request with the folders it names taken out, and a word left dangling before them
    ("from", "in the folder") dropped: what the request says about the data."""
    text = request
    for mention in sorted(mentions, key=lambda m: -m.start):
        head = text[:mention.start].rstrip(" \t\n" + LEADING)
        while True:  # "... from the folder", "... in my directory", "... using"
            shorter = re.sub(r"\s*\b(?:from|in|inside|within|at|under|using|with|on|of|the|"
                             r"this|that|my|our|folder|directory|dir)\s*$", "", head, flags=re.I)
            if shorter == head:
                break
            head = shorter
        text = head + " " + text[mention.end:].lstrip(TRAILING)
    return re.sub(r"\s+", " ", text).strip(" ,;:")
