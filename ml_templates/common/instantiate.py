"""Instantiate a template: copy it and fill the block between the CONFIG markers."""
from __future__ import annotations

import json
import re
from pathlib import Path

START, END = "# --- M3B CONFIG START", "# --- M3B CONFIG END"


def fill_config_block(source: str, values: dict) -> str:
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(source):
        raise ValueError("template has no CONFIG block to fill")
    lines = [START] + [f"{key} = {json.dumps(value)}" for key, value in values.items()] + [END]
    block = "\n".join(lines).replace("true", "True").replace("false", "False")
    return pattern.sub(lambda _: block, source, count=1)


def instantiate(template: Path, destination: Path, values: dict) -> Path:
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_text(fill_config_block(template.read_text(), values), encoding="utf-8")
    return destination
