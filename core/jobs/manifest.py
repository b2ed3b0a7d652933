"""Run manifest: what a model was made from, so a result can be traced and reproduced — the
index files and every data file they name (SHA-256), the training configuration and seed, the
package versions, the platform and the M3Builder commit."""
from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import time
from importlib import metadata
from pathlib import Path

from core.jobs.provenance import file_digest
from core.config.settings import REPO_ROOT

PACKAGES = ("torch", "monai", "transformers", "accelerate", "crewai", "numpy",
            "scikit-learn", "pydicom", "nibabel", "SimpleITK", "nnunetv2", "onnxruntime")
MAX_HASHED_FILES = 20_000


def _files_of(index) -> list[Path]:
    entries = index.items() if isinstance(index, dict) else [(e, None) for e in index]
    files: list[Path] = []
    for key, _ in entries:
        values = [key] if isinstance(key, str) else [key.get("image_path"), key.get("label_path")]
        for value in values:
            for item in (value if isinstance(value, list) else [value]):
                if item:
                    path = Path(item)
                    files.extend(sorted(p for p in path.iterdir() if p.is_file())
                                 if path.is_dir() else [path])
    return files


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
    indexes = {}
    data_files: dict[str, str] = {}
    for name in ("train.json", "test.json", "label_dict.json", "split.json"):
        path = datapath / name
        if not path.exists():
            continue
        indexes[name] = file_digest(path)
        if name in ("train.json", "test.json"):
            for file in _files_of(json.loads(path.read_text())):
                if len(data_files) < MAX_HASHED_FILES and str(file) not in data_files:
                    data_files[str(file)] = file_digest(file)
    config = json.loads(train_config.read_text()) if train_config.exists() else {}
    combined = hashlib.sha256("".join(f"{k}{v}" for k, v in sorted(data_files.items()))
                              .encode()).hexdigest()
    return {"created_at": time.time(), "m3builder_commit": _commit(),
            "python": platform.python_version(), "platform": platform.platform(),
            "packages": _versions(), "seed": config.get("seed"), "train_config": config,
            "index_sha256": indexes, "data_files_sha256": data_files,
            "data_sha256": combined, "data_files_hashed": len(data_files),
            "data_files_truncated": len(data_files) >= MAX_HASHED_FILES}
