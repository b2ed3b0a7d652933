"""The targets a folder offers, as the datacard lists them: every acceptable reading that is
a target of its own (another task, another field, other classes), the chosen one first, with
its coverage, class counts, grouping, split, example rows and — for a records reading — its
recipe (for run-length encoded masks, the ``encoding`` the scan chose). Two readings are one
target when they agree (same task and classes); two readings are two targets when they differ
in task or read different fields; only readings of the same task that disagree about the
classes of the same images are a question for the user.

May import: core.datasets.layouts.types.
"""
from __future__ import annotations

from core.datasets.layouts.types import TEMPLATE_OF_LAYOUT

MAX_TARGETS = 30


def _key(reading) -> tuple:
    scan = reading.scan
    return (scan.task, tuple(sorted(c.lower() for c in scan.classes)))


def is_target_pair(a, b) -> bool:
    """Whether readings ``a`` and ``b`` are two targets (or one), not a disagreement."""
    if a.task != b.task or _key(a) == _key(b):
        return True
    return a.reader.startswith("records:") and b.reader.startswith("records:") and \
        a.reader != b.reader


def target_entry(reading, root: str, example_rows, source_of) -> dict:
    scan = reading.scan
    d = scan.details
    return {"id": reading.reader, "task": scan.task,
            "template": TEMPLATE_OF_LAYOUT.get(scan.layout, "diagnosis"),
            "layout": scan.layout, "name": d.get("target_name") or source_of(reading),
            "source": source_of(reading), "classes": list(scan.classes),
            "class_counts": dict(scan.class_counts), "num_samples": len(scan.samples),
            "num_groups": len({s.group for s in scan.samples}),
            "coverage": round(reading.coverage, 3), "score": reading.score,
            "patient_key": scan.group_source, "dimension": scan.dimension,
            "file_format": scan.file_format,
            "multi_label": any(s.labels is not None for s in scan.samples),
            "split": "kept from the dataset" if scan.existing_split else "made here",
            "examples": example_rows(scan, root), "recipe": d.get("recipe"),
            **({"encoding": d["encoding"]} if d.get("encoding") else {})}


def distinct_targets(picked, viable: list, root: str, example_rows, source_of) -> list[dict]:
    """The picked reading's target first, then every other distinct one (best first)."""
    out, seen = [], set()
    for reading in [picked] + [r for r in viable if r is not picked]:
        key = _key(reading)
        if key in seen:
            continue
        seen.add(key)
        out.append(target_entry(reading, root, example_rows, source_of))
        if len(out) >= MAX_TARGETS:
            break
    return out
