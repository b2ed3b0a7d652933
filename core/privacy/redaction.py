"""Keep patient identifiers out of what an agent (an LLM) is shown. Pure functions, no I/O.

* ``is_identifier_column(name)``: whether a table column (or JSON key) holds direct
  identifiers: names, birth dates, medical record / social security numbers, addresses, phone
  numbers, e-mail addresses. Case, separators and camelCase do not matter (``PatientName``,
  ``patient_birth_date``, ``DOB``, ``E-mail``). Columns that name *things* (``file_name``,
  ``class_name``, ``image_name``, ``series_name`` ...) are not identifiers; neither are the
  pseudonymous ``patient_id`` columns an index needs to split by patient.
* ``redact_rows(header, rows)``: the rows with those columns' cells replaced by ``REDACTED``.
* ``redact_json(value)``: the same for JSON records (keys at any depth).
* ``redact_text(text)``: for free text that looks like a CSV/TSV table, the table with
  identifier columns redacted; for text that looks like JSON (even cut short), the string
  values of identifier keys; e-mail addresses and SSN-like numbers are masked in any text.
* ``safe_dicom_summary(dataset)``: an allow-list of technical DICOM tags (modality, geometry,
  pixel format, acquisition parameters), never an element of the PS3.15 basic
  de-identification profile (``core.privacy.phi.PHI_KEYWORDS``; also Study/Series
  Description and Protocol Name, free text the profile removes), never a person name (VR PN),
  never a private element.
"""
from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from typing import Any
from core.privacy.phi import PHI_KEYWORDS

REDACTED = "[redacted]"

# one token (after splitting on separators and camelCase, or all tokens joined) that marks a
# direct identifier on its own
_STRONG = {
    "surname", "surnames", "forename", "firstname", "lastname", "fullname", "givenname",
    "familyname", "middlename", "maidenname", "patientname", "nickname",
    "dob", "birthdate", "birthday", "dateofbirth", "mrn", "ssn", "medicalrecord",
    "medicalrecordnumber", "socialsecurity", "socialsecuritynumber", "address", "addresses",
    "street", "zipcode", "postcode", "postalcode", "phone", "telephone", "mobile", "fax",
    "phonenumber", "cellphone", "email", "emailaddress",
}
# weak tokens: an identifier only when the whole name is just that ("zip", "tel") ...
_ALONE = {"zip", "tel", "mail"}
# ... or next to one of these
_BIRTH_CONTEXT = {"date", "day", "of", "place", "year"}
# consecutive token pairs that mark one
_ID_PAIRS = {("medical", "record"), ("record", "number"), ("social", "security"),
             ("e", "mail"), ("date", "birth"), ("postal", "code"), ("zip", "code"),
             ("health", "number"), ("insurance", "number"), ("national", "id"),
             ("passport", "number"), ("driver", "license"), ("cell", "phone"),
             ("nhs", "number")}
# a "name" after one of these names a thing, not a person
_THING_QUALIFIERS = {
    "file", "filename", "image", "img", "class", "label", "series", "study", "dataset", "model",
    "column", "organ", "structure", "scan", "sequence", "protocol", "modality", "finding",
    "disease", "feature", "view", "body", "part", "site", "folder", "dir", "directory", "path",
    "case", "category", "tissue", "mask", "seg", "segment", "roi", "region", "task", "split",
    "variable", "field", "key", "tag", "layer", "network", "channel", "volume", "slice",
    "sample", "specimen", "stain", "drug", "test", "lesion", "anatomy", "group", "cohort",
    "project", "source", "code", "type", "device", "scanner", "manufacturer", "vendor",
    "station", "sop", "kind", "display", "short", "long", "abbreviation", "object", "node",
}
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_JSON_PAIR = re.compile(r'"((?:[^"\\\n]|\\.){1,80})"(\s*:\s*)"((?:[^"\\\n]|\\.)*)"')
_JSON_CUT = re.compile(r'"((?:[^"\\\n]|\\.){1,80})"(\s*:\s*)"((?:[^"\\\n]|\\.)*)$')
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
_SSN = re.compile(r"\b\d{3}-\d{2}-\d{4}\b")


def _tokens(name: str) -> list[str]:
    spaced = _CAMEL.sub(" ", str(name))
    return [t for t in re.split(r"[^a-z0-9]+", spaced.lower()) if t]


def is_identifier_column(name: Any) -> bool:
    """Whether a column / key named ``name`` holds a direct patient identifier."""
    tokens = _tokens(name)
    if not tokens:
        return False
    joined = "".join(tokens)
    if joined in _STRONG or joined in _ALONE:
        return True
    for i, tok in enumerate(tokens):
        if tok in _STRONG:
            return True
        if tok in ("name", "names") and not any(t in _THING_QUALIFIERS for t in tokens[:i]):
            return True
        if tok in ("birth", "born") and _BIRTH_CONTEXT & set(tokens):
            return True
    return any(pair in _ID_PAIRS for pair in zip(tokens, tokens[1:]))


def identifier_columns(header: Sequence[Any]) -> list[str]:
    return [str(h) for h in header if is_identifier_column(h)]


def redact_rows(header: Sequence[Any], rows: Iterable[Any]) -> list:
    """Rows (lists in ``header``'s order, or dicts by column) with identifier cells replaced."""
    hidden = {i for i, h in enumerate(header) if is_identifier_column(h)}
    out = []
    for row in rows:
        if isinstance(row, dict):
            out.append({k: (REDACTED if is_identifier_column(k) and v not in ("", None) else v)
                        for k, v in row.items()})
        else:
            out.append([REDACTED if i in hidden and cell not in ("", None) else cell
                        for i, cell in enumerate(row)])
    return out


def redact_json(value: Any, _depth: int = 0) -> Any:
    """A JSON value with every identifier key's value replaced (at any depth)."""
    if _depth > 50:
        return value
    if isinstance(value, dict):
        return {k: (REDACTED if is_identifier_column(k) and v not in ("", None)
                    and not isinstance(v, (dict, list)) else redact_json(v, _depth + 1))
                for k, v in value.items()}
    if isinstance(value, list):
        return [redact_json(v, _depth + 1) for v in value]
    if isinstance(value, str):
        return mask_patterns(value)
    return value


def mask_patterns(text: str) -> str:
    """E-mail addresses and SSN-like numbers masked in any text."""
    return _SSN.sub(REDACTED, _EMAIL.sub(REDACTED, text))


def sniff_delimiter(text: str) -> str | None:
    """The delimiter (tab, comma, semicolon, pipe) when the text's first lines parse as a table
    with the same number (at least two) of fields on each line; None otherwise."""
    lines = [ln for ln in text.splitlines()[:8] if ln.strip()]
    if len(lines) < 2:  # a header alone, or one line of prose, is no table
        return None
    if len(lines) > 1 and len(text.splitlines()) > 8:
        lines = lines[:-1]  # the last line kept may be cut
    for delim in ("\t", ",", ";", "|"):
        try:
            widths = [len(row) for row in csv.reader(lines, delimiter=delim)]
        except csv.Error:
            continue
        if widths and widths[0] >= 2 and all(w == widths[0] for w in widths):
            return delim
    return None


def redact_text(text: str, delimiter: str | None = None) -> str:
    """Free text: when it looks like a delimited table whose header has identifier columns,
    those columns' cells are redacted (the rest is kept as is); e-mails and SSNs are masked."""
    delim = delimiter or sniff_delimiter(text)
    if delim:
        lines = text.splitlines(keepends=True)
        try:
            header = next(csv.reader([lines[0]], delimiter=delim))
        except (csv.Error, StopIteration):
            header = []
        hidden = {i for i, h in enumerate(header) if is_identifier_column(h.strip())}
        if hidden:
            out = io.StringIO()
            writer = csv.writer(out, delimiter=delim, lineterminator="\n")
            writer.writerow(header)
            try:
                for row in csv.reader(io.StringIO("".join(lines[1:])), delimiter=delim):
                    writer.writerow([REDACTED if i in hidden and cell else cell
                                     for i, cell in enumerate(row)])
            except csv.Error:
                return REDACTED + " (a table with identifier columns that could not be parsed)"
            text = out.getvalue()
    elif text.lstrip()[:1] in ("{", "["):  # JSON (perhaps cut): identifier keys' strings
        text = _JSON_PAIR.sub(lambda m: m.group(0) if not is_identifier_column(m.group(1))
                              else f'"{m.group(1)}"{m.group(2)}"{REDACTED}"', text)
        text = _JSON_CUT.sub(lambda m: m.group(0) if not is_identifier_column(m.group(1))
                             else f'"{m.group(1)}"{m.group(2)}"{REDACTED}', text)
    return mask_patterns(text)


# -- DICOM -----------------------------------------------------------------------------------
SAFE_DICOM_KEYWORDS = (
    "Modality", "SOPClassUID", "ImageType", "BodyPartExamined", "ViewPosition", "Laterality",
    "ImageLaterality", "PatientPosition", "Rows", "Columns", "NumberOfFrames", "PixelSpacing",
    "ImagerPixelSpacing", "SliceThickness", "SpacingBetweenSlices", "ImageOrientationPatient",
    "ImagePositionPatient", "SliceLocation", "SamplesPerPixel", "PhotometricInterpretation",
    "BitsAllocated", "BitsStored", "HighBit", "PixelRepresentation", "PlanarConfiguration",
    "RescaleIntercept", "RescaleSlope", "RescaleType", "WindowCenter", "WindowWidth",
    "LossyImageCompression", "KVP", "ConvolutionKernel", "ScanningSequence",
    "SequenceVariant", "MRAcquisitionType", "MagneticFieldStrength", "RepetitionTime",
    "EchoTime", "InversionTime", "FlipAngle", "EchoTrainLength",
    "SeriesNumber", "InstanceNumber", "AcquisitionNumber", "TransferSyntaxUID",
)


def _plain(value: Any) -> Any:
    """A pydicom value as JSON-friendly data (numbers stay numbers, bytes become lengths)."""
    kind = type(value).__name__
    try:
        if kind in ("IS", "ISfloat"):
            return int(value)
        if kind in ("DSfloat", "DSdecimal"):
            return float(value)
    except (TypeError, ValueError):
        pass
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, (list, tuple)) or kind == "MultiValue":
        return [_plain(v) for v in list(value)[:16]]
    text = str(value)
    return text if len(text) <= 120 else text[:117] + "..."


def safe_dicom_summary(dataset) -> dict:
    """Technical tags of a pydicom Dataset (read with ``stop_before_pixels``), never
    identifying ones; ``withheld`` counts the elements not shown."""
    blocked = set(PHI_KEYWORDS) | {"StudyDescription", "SeriesDescription", "ProtocolName",
                                   "PerformedProcedureStepDescription",
                                   "RequestedProcedureDescription"}
    tags: dict[str, Any] = {}
    meta = getattr(dataset, "file_meta", None)
    for keyword in SAFE_DICOM_KEYWORDS:
        if keyword in blocked:
            continue
        source = meta if keyword == "TransferSyntaxUID" else dataset
        if source is None:
            continue
        element = source.data_element(keyword) if keyword in source else None
        if element is None or element.VR in ("PN", "SQ") or element.tag.is_private:
            continue
        tags[keyword] = _plain(element.value)
    total = sum(1 for _ in dataset)
    shown = sum(1 for k in tags if k != "TransferSyntaxUID")
    return {"tags": tags, "withheld": max(total - shown, 0),
            "note": "technical tags only; patient-identifying and free-text tags are never "
                    "shown"}
