"""Run manifest: what a model was made from, so a result can be traced and reproduced — the
index files (with the DICOM series manifests they name) and every data file they read
(SHA-256; an array file once however many ``file.npz::key[i]`` references point into it), the
training configuration and seed, the package versions, the platform and the M3Builder commit.
Data files that have gone missing are counted and named, never a reason to fail."""
from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import time
from importlib import metadata
from pathlib import Path

from core.config.settings import REPO_ROOT
from core.imaging.refs import MANIFEST_SUFFIX, ImageReadError, ref_files, suffix_of
from core.jobs.provenance import file_digest

PACKAGES = ("torch", "monai", "transformers", "accelerate", "crewai", "numpy",
            "scikit-learn", "pydicom", "nibabel", "SimpleITK", "nnunetv2", "onnxruntime")
MAX_HASHED_FILES = 20_000
MAX_EXAMPLES = 10  # missing references named in the manifest


def _refs_of(index) -> list:
    """Every image reference of an index: a diagnosis index's keys; a list index's
    image_path and label_path values (a path, element ref, manifest or list of channels)."""
    if isinstance(index, dict):
        return list(index)
    refs = []
    for entry in index if isinstance(index, list) else []:
        if isinstance(entry, dict):
            refs.extend(entry[k] for k in ("image_path", "label_path") if entry.get(k))
    return refs


def _hash_data(datapath: Path, refs: list, data_files: dict[str, str],
               indexes: dict[str, str], missing: list[str]) -> None:
    """SHA-256 of every file the references read (core.imaging.refs.ref_files: an element
    ref's array file, a folder's slices, a manifest's DICOM files), each file once however many
    references point into it; series manifests go with the index files. A reference whose
    files are gone is recorded in ``missing`` with the reason."""
    for ref in refs:
        if len(data_files) >= MAX_HASHED_FILES:
            return
        try:
            files = ref_files(ref, manifests=True)
        except ImageReadError as exc:
            missing.append(str(exc))
            continue
        for file in files:
            if suffix_of(file) == MANIFEST_SUFFIX:
                name = str(file.relative_to(datapath)) if file.is_relative_to(datapath) \
                    else str(file)
                if name not in indexes:
                    indexes[name] = file_digest(file)
            elif str(file) not in data_files and len(data_files) < MAX_HASHED_FILES:
                data_files[str(file)] = file_digest(file)


def _versions() -> dict:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=5).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def build_manifest(datapath: Path, train_config: Path) -> dict:
    indexes: dict[str, str] = {}
    data_files: dict[str, str] = {}
    missing: list[str] = []
    for name in ("train.json", "test.json", "label_dict.json", "split.json"):
        path = datapath / name
        if not path.exists():
            continue
        indexes[name] = file_digest(path)
        if name in ("train.json", "test.json"):
            _hash_data(datapath, _refs_of(json.loads(path.read_text())), data_files, indexes,
                       missing)
    config = json.loads(train_config.read_text()) if train_config.exists() else {}
    combined = hashlib.sha256("".join(f"{k}{v}" for k, v in sorted(data_files.items()))
                              .encode()).hexdigest()
    return {"created_at": time.time(), "m3builder_commit": _commit(),
            "python": platform.python_version(), "platform": platform.platform(),
            "packages": _versions(), "seed": config.get("seed"), "train_config": config,
            "index_sha256": indexes, "data_files_sha256": data_files,
            "data_sha256": combined, "data_files_hashed": len(data_files),
            "data_files_truncated": len(data_files) >= MAX_HASHED_FILES,
            "data_files_missing": len(missing), "data_missing_examples": missing[:MAX_EXAMPLES]}
