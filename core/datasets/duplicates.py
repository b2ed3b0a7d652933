"""Exact duplicates among a dataset's image files: same size first (a stat each), then a hash
of the file — and of the voxel file a header names (Analyze ``.hdr`` + ``.img``, MetaImage
``.mhd`` + ``.raw``: headers of one size are alike; their data tells images apart).

May import: core.datasets.image_geometry, core.datasets.layouts.types.
"""
from __future__ import annotations

import hashlib
import os
from collections import defaultdict
from pathlib import Path

from core.datasets.image_geometry import ref_parts, sample_refs
from core.datasets.layouts.types import Sample

MAX_HASH_BYTES = 50_000_000


def _data_file(path: Path) -> Path | None:
    """The voxel file a header names, or None."""
    options = {".hdr": (".img",), ".mhd": (".raw", ".zraw")}.get(path.suffix.lower(), ())
    return next((path.with_suffix(o) for o in options if path.with_suffix(o).is_file()), None)


def _content_hash(path: Path) -> str:
    digest = hashlib.sha1(path.read_bytes())
    data = _data_file(path)
    if data is not None and os.stat(data).st_size < MAX_HASH_BYTES:
        digest.update(data.read_bytes())
    return digest.hexdigest()


def exact_duplicates(samples: list[Sample], limit: int) -> tuple[list[list[Sample]], int, int]:
    """(groups of samples whose first image files are identical, candidates of one size,
    files hashed); at most ``limit`` files are hashed, the smallest groups first."""
    by_size: dict[int, list[Sample]] = defaultdict(list)
    for s in samples:
        path, element = ref_parts(sample_refs(s)[0])
        if element:
            continue  # elements of one array file: not comparable by file hash
        try:
            st = os.stat(path)
        except OSError:
            continue
        if not path.is_dir() and st.st_size < MAX_HASH_BYTES:
            data = _data_file(path)
            by_size[st.st_size + (os.stat(data).st_size if data else 0)].append(s)
    candidates = [group for group in by_size.values() if len(group) > 1]
    hashes: dict[str, list[Sample]] = defaultdict(list)
    hashed = 0
    for group in sorted(candidates, key=len):
        if hashed + len(group) > limit:
            break
        for s in group:
            hashes[_content_hash(Path(sample_refs(s)[0]))].append(s)
        hashed += len(group)
    return ([g for g in hashes.values() if len(g) > 1], sum(len(g) for g in candidates),
            hashed)
