"""The parent's end of the run channel (ml_templates/common/channel.py): tail the metrics file a
training child appends to, validate every complete line, and write the rows to the store for
this job only. A child never opens the store, so what it writes can only ever become metrics of
the job that started it, and only values that pass these checks.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

from core.store.db import Store

MAX_LINE_BYTES = 64 * 1024
MAX_VALUES = 200
MAX_STEP = 10**12
NAME_RE = re.compile(r"^[A-Za-z0-9_./\- ]{1,80}$")


def parse_line(line: str) -> tuple[int, float | None, dict[str, float]] | None:
    """(step, epoch, values) of one channel line, or None when it is not a valid record."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("kind") != "metrics":
        return None
    step, epoch, values = record.get("step"), record.get("epoch"), record.get("values")
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_STEP:
        return None
    if epoch is not None and (isinstance(epoch, bool) or not isinstance(epoch, (int, float))
                              or not math.isfinite(epoch) or not 0 <= epoch <= 1e7):
        return None
    if not isinstance(values, dict) or not 0 < len(values) <= MAX_VALUES:
        return None
    clean = {}
    for name, value in values.items():
        if (not isinstance(name, str) or not NAME_RE.match(name) or isinstance(value, bool)
                or not isinstance(value, (int, float)) or not math.isfinite(value)):
            continue
        clean[name] = float(value)
    if not clean:
        return None
    return step, None if epoch is None else float(epoch), clean


class MetricsTail:
    """Reads what was appended since the last call; a partial last line waits for its end."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.offset = 0
        self.rejected = 0

    def read(self) -> list[tuple[int, float | None, dict[str, float]]]:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n")
        if end < 0:
            if len(data) > MAX_LINE_BYTES:  # a line that never ends: skip it
                self.offset += len(data)
                self.rejected += 1
            return []
        self.offset += end + 1
        records = []
        for raw in data[:end].split(b"\n"):
            parsed = None
            if raw.strip() and len(raw) <= MAX_LINE_BYTES:
                parsed = parse_line(raw.decode("utf-8", errors="replace"))
            if parsed is None:
                self.rejected += bool(raw.strip())
                continue
            records.append(parsed)
        return records

    def ingest(self, store: Store, job_id: str) -> int:
        """Write what is new to the store for ``job_id``; returns how many records."""
        records = self.read()
        for step, epoch, values in records:
            store.add_metrics(job_id, step, epoch, values)
        return len(records)
