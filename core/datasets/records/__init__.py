"""A dataset folder read as data: record sources (tables, JSON/JSONL/YAML/XML, texts, lists),
typed fields, targets and the recipes that read them (core.datasets.records.reading).

May import: core.datasets.layouts (the bottom: types, inventory, tables, id matching)."""
