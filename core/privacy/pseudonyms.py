"""Pseudonyms that replace patient identifiers in everything M3Builder stores and shows: a stable
key per patient (a patient's series still split together), never the identifier itself.

May import: the standard library only."""
from __future__ import annotations

import hashlib


def pseudonym(patient_id: str) -> str:
    """What M3Builder stores and shows instead of a DICOM PatientID: a stable pseudonym (the
    split still groups a patient's series), never the identifier itself."""
    if not patient_id:
        return ""
    return "patient-" + hashlib.sha256(patient_id.encode("utf-8")).hexdigest()[:12]
