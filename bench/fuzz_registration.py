"""Fuzzed registrations: generated bad or odd dataset folders through the same registration
the Datasets page and ``python -m crew register`` call (issue 14, "Fuzzed registrations").

Each example is a small folder drawn by Hypothesis (fixed seed): class folders and loose files
with odd names (spaces, unicode, newlines, leading dashes, very long, dotfiles), files that are
empty, random bytes, truncated or mislabelled images (a PNG named ``.dcm``, a DICOM preamble
with garbage, a NIfTI header cut short, gzip of garbage), label tables with missing files, bad
encodings and ragged rows, broken ``dataset.json``, pickles, and symbolic links (loops,
dangling, to outside the folder, to a parent). It is registered with ``register_dataset`` and
checked:

* no exception escapes (a traceback is a failure);
* a refusal's every error names a file or the folder and is a sentence, not a repr;
* the folder is byte-identical afterwards (names, modes, mtimes, sizes, contents, link
  targets), and nothing was written inside it;
* a refused folder leaves no datacard behind, and the store's ``integrity_check`` stays ok.

``python -m bench.fuzz_registration [--examples 1000] [--seed 0]`` (``make fuzz``) prints the
totals; tests/test_fuzz_registration.py runs a few hundred examples in ``make test``.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import os
import stat
import struct
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

NAME_CHARS = st.sampled_from(list("abcXYZ019_-. ") + ["é", "ß", "中", "\n", "\t", "'", "\""])
CLASS_NAMES = st.sampled_from(["NORMAL", "PNEUMONIA", "covid", "0", "1", "Normal ", "ünïcode",
                               "-dash", ".hidden", "a" * 200, "images", "labels", "masks",
                               "imagesTr", "labelsTr", "train", "test"])
EXTENSIONS = st.sampled_from([".png", ".jpg", ".jpeg", ".dcm", ".nii", ".nii.gz", ".nrrd",
                              ".mha", ".npz", ".npy", ".csv", ".json", ".txt", ".pt", ".pck",
                              ".tif", "", ".PNG", ".xlsx", ".zip"])
KINDS = st.sampled_from(["empty", "random", "png", "png_truncated", "dicom_garbage",
                         "nifti_truncated", "gzip_garbage", "csv_labels", "csv_latin1",
                         "csv_ragged", "json_broken", "json_dataset", "pickle", "npz_garbage",
                         "text"])
LINKS = st.sampled_from(["loop", "self", "dangling", "outside_file", "outside_dir", "parent",
                         "sibling"])


def _png(width: int = 8, height: int = 8, offset: int = 0) -> bytes:
    import numpy as np
    from PIL import Image
    buf = io.BytesIO()
    Image.fromarray(((np.arange(width * height) + offset) % 256).astype("uint8")
                    .reshape(height, width)).save(buf, format="PNG")
    return buf.getvalue()


def content(kind: str, blob: bytes, names: list[str]) -> bytes:
    """The bytes of one generated file of ``kind`` (``blob`` is drawn randomness)."""
    if kind == "empty":
        return b""
    if kind == "random":
        return blob
    if kind == "png":
        return _png()
    if kind == "png_truncated":
        data = _png()
        return data[: max(8, len(blob) % len(data))]
    if kind == "dicom_garbage":
        return b"\0" * 128 + b"DICM" + blob
    if kind == "nifti_truncated":
        return struct.pack("<i", 348) + blob[:100]
    if kind == "gzip_garbage":
        return gzip.compress(blob)
    if kind == "csv_labels":
        rows = ["image,label"] + [f"{n},{'A' if i % 2 else 'B'}" for i, n in enumerate(names)]
        rows.append("missing_file.png,A")
        return "\n".join(rows).encode()
    if kind == "csv_latin1":
        return "image;Befund\nbild1.png;Lungenentzündung\n".encode("latin-1") + blob[:20]
    if kind == "csv_ragged":
        return b"a,b,c\n1\n2,3,4,5,6\n\"unclosed,7\n"
    if kind == "json_broken":
        return b'{"labels": {"0": "background", '
    if kind == "json_dataset":
        return (b'{"name": 5, "labels": ["x"], "training": [{"image": "./imagesTr/none.nii.gz",'
                b' "label": 7}], "numTraining": "many"}')
    if kind == "pickle":
        return b"\x80\x04\x95" + blob[:30]   # never unpickled: registration refuses pickles
    if kind == "npz_garbage":
        return b"PK\x03\x04" + blob
    return blob.decode("latin-1", "replace").encode("utf-8")


@dataclass
class FileSpec:
    folder: str
    name: str
    ext: str
    kind: str
    blob: bytes


@dataclass
class FolderSpec:
    files: list[FileSpec]
    links: list[tuple[str, str]] = field(default_factory=list)   # (kind, name)
    empty_dirs: list[str] = field(default_factory=list)
    base: bool = False      # start from a valid two-class folder (odd files added to it)


def file_specs():
    return st.builds(FileSpec, folder=st.one_of(st.just(""), CLASS_NAMES,
                                                st.tuples(CLASS_NAMES, CLASS_NAMES).map(
                                                    lambda t: f"{t[0]}/{t[1]}")),
                     name=st.text(NAME_CHARS, min_size=1, max_size=12), ext=EXTENSIONS,
                     kind=KINDS, blob=st.binary(max_size=400))


def folder_specs():
    return st.builds(FolderSpec, files=st.lists(file_specs(), min_size=0, max_size=14),
                     links=st.lists(st.tuples(LINKS, st.text(NAME_CHARS, min_size=1,
                                                             max_size=6)), max_size=3),
                     empty_dirs=st.lists(CLASS_NAMES, max_size=2), base=st.booleans())


def _safe(name: str) -> str:
    name = name.replace("/", "_").replace("\0", "_")
    return "_" if name in (".", "..") else name[:120]


def write_folder(spec: FolderSpec, root: Path, outside: Path) -> None:
    """Materialise ``spec`` under ``root`` (``outside`` is a folder beside it, for links)."""
    root.mkdir(parents=True)
    if spec.base:   # 2 classes x 12 patients of 8x8 PNGs: registrable before the odd files
        for c, label in enumerate(("NORMAL", "PNEUMONIA")):
            (root / label).mkdir()
            for k in range(12):
                (root / label / f"patient{label[0]}{k:02d}_1.png").write_bytes(
                    _png(8 + k, 8, 97 * c))
    names = [f"{_safe(f.name)}{f.ext}" for f in spec.files]
    for f, name in zip(spec.files, names):
        folder = root / Path(*[_safe(p) for p in f.folder.split("/") if p]) if f.folder else root
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):   # a file of that name came first
            continue
        target = folder / name
        if target.is_dir():
            continue
        target.write_bytes(content(f.kind, f.blob, names))
    for d in spec.empty_dirs:
        (root / _safe(d)).mkdir(exist_ok=True)
    for i, (kind, name) in enumerate(spec.links):
        link = root / f"link{i}_{_safe(name)}"
        if link.exists() or link.is_symlink():
            continue
        if kind == "loop":
            other = root / f"loop{i}_b"
            os.symlink(other.name, link)
            if not other.is_symlink():
                os.symlink(link.name, other)
        elif kind == "self":
            os.symlink(link.name, link)
        elif kind == "dangling":
            os.symlink("does/not/exist.png", link)
        elif kind == "outside_file":
            os.symlink(str(outside / "canary.png"), link)
        elif kind == "outside_dir":
            os.symlink(str(outside), link)
        elif kind == "parent":
            os.symlink("..", link)
        else:
            os.symlink(".", link)


def digest(root: Path) -> dict[str, tuple]:
    """Everything that must stay unchanged under ``root`` (the folder itself included): per
    entry its mode, owner, group, mtime, size, extended attributes, and a regular file's
    content hash or a link's target. Links are never followed, other files never opened."""
    def state(path: str) -> tuple:
        st_ = os.lstat(path)
        try:
            xattrs = tuple(sorted(os.listxattr(path, follow_symlinks=False)))
        except OSError:
            xattrs = ()
        if stat.S_ISLNK(st_.st_mode):
            content = os.readlink(path)
        elif stat.S_ISREG(st_.st_mode):
            with open(path, "rb") as fh:
                content = hashlib.sha256(fh.read()).hexdigest()
        else:
            content = ""
        return (st_.st_mode, st_.st_uid, st_.st_gid, st_.st_mtime_ns,
                0 if stat.S_ISDIR(st_.st_mode) else st_.st_size, xattrs, content)

    out = {".": state(str(root))}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            out[os.path.relpath(path, root)] = state(path)
    return out


@dataclass
class Outcome:
    status: str                 # registered | invalid | needs_choice | traceback
    problems: list[str] = field(default_factory=list)   # broken promises (empty: fine)
    errors: list[str] = field(default_factory=list)


def _names_a_place(message: str, root: Path, entries: list[str]) -> bool:
    if str(root) in message or root.name in message or "folder" in message.lower():
        return True
    parts = {p for e in entries for p in Path(e).parts}
    return any(p in message if len(p) > 2 else f"'{p}'" in message for p in parts)


def register_one(spec: FolderSpec, work: Path, settings_, store, index: int) -> Outcome:
    """Write, register and check one folder; never raises."""
    from core.datasets.registration import register_dataset
    from core.datasets.validation import Limits
    root, outside = work / f"ds{index}", work / f"outside{index}"
    outside.mkdir(parents=True)
    (outside / "canary.png").write_bytes(_png())
    write_folder(spec, root, outside)
    before, canary = digest(root), digest(outside)
    name = f"fuzz {index}"
    try:
        result = register_dataset(settings_, store, str(root), name,
                                  description="fuzzed folder", limits=Limits(seconds=20.0))
    except Exception:   # noqa: BLE001 - counting tracebacks is the point
        return Outcome("traceback", [traceback.format_exc(limit=8)])
    outcome = Outcome(result["status"], errors=list(result.get("errors") or []))
    if digest(root) != before or digest(outside) != canary:
        outcome.problems.append("the dataset folder (or a folder a link points to) changed")
    if result["status"] != "registered":
        card = settings_.datacards_dir / f"fuzz_{index}.json"
        if card.exists():
            outcome.problems.append(f"a refused registration left {card.name}")
        if not outcome.errors:
            outcome.problems.append("refused without saying why")
        for message in outcome.errors:
            if not isinstance(message, str) or len(message) < 20 or "Traceback" in message:
                outcome.problems.append(f"unclear error: {message!r}")
            elif not _names_a_place(message, root, list(before)):
                outcome.problems.append(f"error names no file or folder: {message!r}")
    return outcome


def store_ok(store) -> bool:
    rows = store.rows("PRAGMA integrity_check")
    return bool(rows) and list(rows[0].values())[0] == "ok"


def run(examples: int, seed_value: int, work: Path, on_outcome) -> None:
    """Draw ``examples`` folders with Hypothesis and hand each outcome to ``on_outcome``."""
    from core.config.settings import get_settings
    from core.store.db import open_store
    settings_ = get_settings(str(work / "home"))
    store = open_store(settings_.store_path)
    counter = iter(range(10 ** 9))

    @seed(seed_value)
    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(folder_specs())
    def body(spec: FolderSpec) -> None:
        on_outcome(spec, register_one(spec, work, settings_, store, next(counter)))

    body()
    if not store_ok(store):
        on_outcome(None, Outcome("traceback", ["store integrity_check failed"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    totals: Counter = Counter()
    failures: list[str] = []
    started = time.time()

    def record(spec, outcome: Outcome) -> None:
        totals["cases"] += 1
        totals[outcome.status] += 1
        if outcome.status == "invalid" and not outcome.problems:
            totals["clear errors"] += 1
        for problem in outcome.problems:
            if outcome.status != "traceback":   # a traceback is counted by its status
                totals["data lost" if "changed" in problem else "unclear"] += 1
            if len(failures) < 5:
                failures.append(f"{problem}\n  folder: {spec!r}"[:1500])

    with tempfile.TemporaryDirectory(prefix="m3b-fuzz-") as tmp:
        os.environ["M3B_HOME"] = str(Path(tmp) / "home")
        run(args.examples, args.seed, Path(tmp), record)
    print(f"fuzzed registrations: {totals['cases']} cases in {time.time() - started:.0f} s "
          f"(seed {args.seed})")
    for key in ("registered", "invalid", "needs_choice", "clear errors", "unclear",
                "traceback", "data lost"):
        print(f"  {key:<14} {totals[key]}")
    for f in failures:
        print("---", f)
    return 1 if totals["traceback"] or totals["data lost"] or totals["unclear"] else 0


if __name__ == "__main__":
    sys.exit(main())
