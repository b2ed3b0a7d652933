"""Decoded images, computed once: what the dataloader templates share to cache the deterministic
part of their transforms (read, intensity, resize or resample) so it runs once per image, not
once per epoch.

* **Where**: in memory when the whole index fits a memory budget (a share of the available RAM,
  capped); on disk through ``monai.data.PersistentDataset`` in the job's cache folder
  (``<job>/cache/``, beside ``Datapath/``) when it does not, or as well when there is a cache
  folder (so the dataloader check's decodes and a re-run's are reused). A cache folder inside
  a dataset folder is refused: nothing is ever written there.
* **Key**: each record carries a digest of the dataloader's CONFIG and source, the MONAI
  version, the image reference and the (path, size, mtime) of every file it reads, so a changed
  file, CONFIG or dataloader never meets a stale entry (PersistentDataset hashes the record).
"""
from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from core.imaging.refs import ImageReadError, ref_files

MEMORY_SHARE = 0.25          # of the available RAM a job's decoded images may take
MEMORY_CAP = 16 << 30        # bytes, whatever the machine
FALLBACK_AVAILABLE = 2 << 30  # when the available memory cannot be read


def available_memory() -> int:
    """Bytes of RAM available now: psutil, else the kernel's free pages (sysconf needs no
    /proc, which a confined child may not read), else a modest guess."""
    try:
        import psutil
        return int(psutil.virtual_memory().available)
    except Exception:  # noqa: BLE001 - psutil absent or /proc closed to this process
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return FALLBACK_AVAILABLE


def memory_budget() -> int:
    return int(min(MEMORY_CAP, MEMORY_SHARE * available_memory()))


def fits_in_memory(n_items: int, bytes_per_item: float, budget: int | None = None) -> bool:
    """Whether n_items decoded images of bytes_per_item each fit the memory budget."""
    return n_items * bytes_per_item <= (memory_budget() if budget is None else budget)


def file_stamp(ref) -> list:
    """(path, size, mtime_ns) of every file an image reference reads (a DICOM series manifest
    with its files, an array file once, every channel); a reference that reads no file gets
    its error instead (the decode will fail and say so; nothing is cached for it)."""
    try:
        files = ref_files(ref, manifests=True)
    except ImageReadError as exc:
        return [["unreadable", str(exc)]]
    out = []
    for path in files:
        try:
            st = path.stat()
            out.append([str(path), st.st_size, st.st_mtime_ns])
        except OSError as exc:
            out.append([str(path), "stat failed", str(exc)])
    return out


def config_digest(config: dict, source: str | Path | None = None) -> str:
    """What the cached values depend on besides the image: the CONFIG values, the dataloader's
    own source (an edited dataloader never reuses another's cache) and the MONAI version."""
    import monai
    digest = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode())
    digest.update(monai.__version__.encode())
    if source is not None:
        try:
            digest.update(Path(source).read_bytes())
        except OSError:
            digest.update(str(source).encode())
    return digest.hexdigest()


def cache_records(refs: Sequence, config_key: str,
                  key: str = "image") -> tuple[list[dict], set[Path]]:
    """One record per reference, ``{key: ref, "cache_key": digest}``, whose digest changes when
    the CONFIG/dataloader (config_key) or any file the reference reads changes; and the folders
    those files lie in."""
    records, folders = [], set()
    for ref in refs:
        stamp = file_stamp(ref)
        folders.update(Path(s[0]).parent for s in stamp if s[0] != "unreadable")
        text = json.dumps([config_key, ref, stamp], default=str)
        records.append({key: ref, "cache_key": hashlib.sha256(text.encode()).hexdigest()})
    return records, folders


def safe_cache_dir(cache_dir: str | Path | None, folders: set[Path]) -> Path | None:
    """The cache folder, or None (with a warning) when it would lie inside a folder holding
    indexed images: nothing is ever written inside a dataset folder."""
    if not cache_dir:
        return None
    folder = Path(cache_dir).resolve()
    inside = next((p for p in sorted(folders) if folder.is_relative_to(p.resolve())), None)
    if inside is not None:
        warnings.warn(f"decoded-image cache {folder} would lie inside the dataset folder "
                      f"{inside}: not caching on disk", stacklevel=2)
        return None
    return folder


class DecodedImages(torch.utils.data.Dataset):
    """``records[i]`` -> ``prepare(records[i])`` (a deterministic MONAI transform), computed
    once: kept in memory (``in_memory``) and/or written through ``PersistentDataset`` to
    ``cache_dir``; with neither, computed on every access. A corrupt or unreadable image raises
    on every access (nothing is cached for it)."""

    def __init__(self, records: list[dict], prepare: Callable, cache_dir: Path | None,
                 in_memory: bool):
        from monai.data import Dataset, PersistentDataset
        from monai.transforms import Compose
        transform = prepare if isinstance(prepare, Compose) else Compose([prepare])
        self.records = records
        self.cache_dir = cache_dir
        self.source = (PersistentDataset(records, transform, cache_dir=cache_dir)
                       if cache_dir is not None else Dataset(records, transform))
        self.memory: list | None = [None] * len(records) if in_memory else None

    @property
    def mode(self) -> str:
        return "+".join(m for m, on in (("memory", self.memory is not None),
                                        ("disk", self.cache_dir is not None)) if on) or "none"

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int) -> dict:
        if self.memory is not None and self.memory[i] is not None:
            return self.memory[i]
        try:
            item = self.source[i]
        except RuntimeError as exc:  # MONAI wraps the reader's error: raise the reader's own
            inner = exc
            while inner.__cause__ is not None and "applying transform" in str(inner):
                inner = inner.__cause__
            if inner is exc:
                raise
            raise inner from None
        if self.memory is not None:
            self.memory[i] = item
        return item
