"""Instantiate a template: copy it and fill the block between the CONFIG markers."""
from __future__ import annotations

import ast
import re
from pathlib import Path

START, END = "# --- M3B CONFIG START", "# --- M3B CONFIG END"


def fill_config_block(source: str, values: dict) -> str:
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(source):
        raise ValueError("template has no CONFIG block to fill")
    lines = [START]
    for key, value in values.items():
        if not key.isidentifier():
            raise ValueError(f"CONFIG key {key!r} is not a Python name")
        literal = repr(value)
        try:  # only plain data goes into a generated file
            plain = ast.literal_eval(literal) == value
        except (ValueError, SyntaxError):
            plain = False
        if not plain:
            raise ValueError(f"CONFIG value for {key} is not a plain Python literal: {literal}")
        lines.append(f"{key} = {literal}")
    block = "\n".join(lines + [END])
    return pattern.sub(lambda _: block, source, count=1)


def instantiate(template: Path, destination: Path, values: dict) -> Path:
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_text(fill_config_block(template.read_text(), values), encoding="utf-8")
    return destination
