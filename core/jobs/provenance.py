"""Fingerprints that tie a job's scores to the system's own steps: the predictions the training
template wrote (checked before the evaluator scores them) and the report the evaluator wrote
(checked before a job may end "succeeded"). In LLM mode an agent can run scripts inside its
workspace; these make a hand-written prediction file or report.json detectable."""
from __future__ import annotations

import hashlib
from pathlib import Path

PREDICTION_FILES = ("predictions.json", "val_predictions.json")
PREDICTION_DIRS = ("predictions",)


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def predictions_digest(logout: Path) -> str:
    """One hash over the template's prediction outputs (file names and contents); "" if none."""
    digest, found = hashlib.sha256(), False
    for name in PREDICTION_FILES:
        path = logout / name
        if path.is_file():
            found = True
            digest.update(name.encode() + b"\0" + file_digest(path).encode())
    for name in PREDICTION_DIRS:
        folder = logout / name
        if folder.is_dir():
            for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                found = True
                digest.update(str(path.relative_to(logout)).encode() + b"\0"
                              + file_digest(path).encode())
    return digest.hexdigest() if found else ""
