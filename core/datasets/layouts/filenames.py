"""Labels carried in file names, with no class folders and no table:
``patient001_pneumonia_1.png``, ``covid_0001.png``, ``IM-0001-normal.jpeg``.

The label is the word token that varies over a small vocabulary and of which every file holds
exactly one: tokens are the parts of the stem between ``_ - . space``; a candidate is a word
(letters, at most two trailing digits: ``covid19``) that several files share but not all, and
that is not a known non-label word (views, sides, sequences, ``img``/``scan``/``patient``...).
Sets of candidates that never meet in one file are tried as the vocabulary; the set the
datacard description names most, then the one covering most files, wins. It must hold 2 to 20
words (more only when the description names them) and label at least 90% of the files, so
datasets whose names carry only IDs (``ISIC_0000001.jpg``, ``case_00012.nii.gz``, UIDs) are left
to the other layouts.

The patient key is a patient prefix of the name (``patient001_...``), else the part before the
label when several files share it (``0042_normal_1.png``, ``0042_normal_2.png``), else none.
Images may sit at the top of the folder, in an ``images/`` folder or any plain container folder
(``scans/``, ``nifti/``: no sibling folder holds images), or under ``train/`` ``test/`` (whose
split is kept).
"""
from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

from core.datasets.layouts import links
from core.datasets.layouts.common import (GENERIC_DIRS, group_source, held_out_splits,
                                          split_of_path)
from core.datasets.layouts.types import (FORMAT_OF_SUFFIX, MAX_FILES, SPLIT_NAMES, Sample,
                                         ScanResult, group_of, image_suffix, is_image)
from core.datasets.layouts.mask_pairing import IMAGE_DIRS
from core.datasets.layouts.array_headers import array_shape, dimension_of_shape

WORD = re.compile(r"^(?P<word>[a-z]{2,})\d{0,2}$")
TOKEN_SPLIT = re.compile(r"[_\-\s.]+")
NOT_LABELS = {
    "im", "img", "image", "images", "scan", "scans", "slice", "file", "patient", "person",
    "subject", "sub", "case", "study", "series", "view", "ap", "pa", "lat", "lateral", "frontal",
    "left", "right", "axial", "sagittal", "coronal", "ax", "sag", "cor", "t1", "t2", "flair",
    "dwi", "adc", "pd", "ct", "mr", "mri", "xr", "xray", "cxr", "us", "pet", "dcm", "copy",
    "mask", "seg", "label", "labels", "train", "test", "val", "valid", "training", "testing",
    "validation", "male", "female", "fig", "frame", "roi", "crop", "aug", "orig", "original",
    "resized", "preprocessed", "id", "no", "num", "pt", "pat", "sample", "data", "part", "new",
    "old", "final", "version", "ver", "rev", "px", "mm", "nii", "gz", "png", "jpg", "jpeg",
    "tif", "tiff", "bmp", "vol", "volume", "pic", "photo", "visit", "baseline", "day",
    "week", "month", "year", "time", "run", "echo", "phase", "rgb", "gray", "grey",
    "od", "os", "ou", "cc", "mlo", "ml", "lmlo", "rmlo", "lcc", "rcc", "dx", "cr", "mg",
}  # od/os/ou: right/left/both eyes; cc/mlo: mammography views
MEDICAL_HINTS = {"normal", "healthy", "negative", "positive", "benign", "malignant", "tumor",
                 "tumour", "cancer", "covid", "pneumonia", "disease", "abnormal", "control",
                 "nodule", "lesion", "infected", "bacteria", "virus", "viral", "bacterial",
                 "glioma", "meningioma", "pituitary", "notumor", "fracture", "effusion",
                 "cyst", "stone", "opacity", "tuberculosis", "tb", "ad", "mci", "cn"}
MAX_CLASSES = 20
MIN_COVERAGE = 0.9


def _stem(name: str) -> str:
    lower = name.lower()
    return lower[:-7] if lower.endswith(".nii.gz") else lower.rsplit(".", 1)[0]


def _words(stem: str) -> list[str]:
    """Candidate label tokens of a stem, in order."""
    out = []
    for token in TOKEN_SPLIT.split(stem):
        match = WORD.match(token)
        if match and token not in NOT_LABELS and match["word"] not in NOT_LABELS:
            out.append(token)
    return out


def _partitions(files_of: dict[str, set[int]], described: set[str]) -> list[list[str]]:
    """Sets of tokens that never occur in the same file, grown greedily from each token."""
    order = sorted(files_of, key=lambda t: (t not in described, -len(files_of[t]), t))
    found: list[list[str]] = []
    for seed in order[:40]:
        chosen, covered = [seed], set(files_of[seed])
        for token in order:
            if token != seed and not files_of[token] & covered:
                chosen.append(token)
                covered |= files_of[token]
        key = sorted(chosen)
        if key not in found:
            found.append(key)
    return found


def find_label_tokens(stems: list[str], description: str = "") -> dict | None:
    """{"vocabulary": [...], "labels": [label or None per stem], "coverage": float} for the
    token that carries the label, or None when the names carry no label."""
    n = len(stems)
    if n < 4:
        return None
    words = [_words(s) for s in stems]
    files_of: dict[str, set[int]] = defaultdict(set)
    for i, tokens in enumerate(words):
        for token in tokens:
            files_of[token].add(i)
    text = description.lower()
    described = {t for t in files_of if re.search(r"(?<![a-z])" + re.escape(t) + r"(?![a-z])",
                                                   text)}
    files_of = {t: f for t, f in files_of.items() if 2 <= len(f) < n or
                (t in described and len(f) < n)}
    best, best_score = None, None
    for vocab in _partitions(files_of, described):
        limit = max(MAX_CLASSES, len(described & set(vocab)))
        covered = set().union(*(files_of[t] for t in vocab))
        if not 2 <= len(vocab) <= limit or len(covered) < MIN_COVERAGE * n:
            continue
        score = (len(described & set(vocab)), len(MEDICAL_HINTS & set(vocab)) > 0,
                 len(covered), -len(vocab))
        if best_score is None or score > best_score:
            best, best_score = vocab, score
    if best is None:
        return None
    label_of = {i: t for t in best for i in files_of[t]}
    return {"vocabulary": best, "labels": [label_of.get(i) for i in range(n)],
            "coverage": len(label_of) / n}


def _image_files(root: Path) -> list[Path] | None:
    """Images at the top, in image/split folders (``images/``, ``train/``, ``test/images/``) or
    in a plain container folder (``scans/``, ``nifti/``, ``data/``: a folder none of whose
    siblings holds images, so not a class); None as soon as images sit in folders that have
    sibling image folders (class folders, case folders)."""
    allowed = set(IMAGE_DIRS) | set(SPLIT_NAMES) | GENERIC_DIRS
    images: list[Path] = []
    folders: set[tuple[str, ...]] = set()
    for folder, dirs, files in links.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found = [Path(folder) / f for f in sorted(files) if is_image(f)]
        if found:
            folders.add(Path(folder).relative_to(root).parts)
        images += found
        if len(images) > MAX_FILES:
            return None
    siblings: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for parts in folders:
        for i, part in enumerate(parts):
            siblings[parts[:i]].add(part)
    for parts in folders:
        for i, part in enumerate(parts):
            if part.lower() not in allowed and len(siblings[parts[:i]]) > 1:
                return None
    return images


def _spellings(images: list[Path], vocabulary: list[str]) -> dict[str, str]:
    """Each label token as the file names most often spell it (``AD``, ``Normal``)."""
    seen: dict[str, Counter] = defaultdict(Counter)
    wanted = set(vocabulary)
    for path in images[:20000]:
        name = path.name
        stem = name[:-7] if name.lower().endswith(".nii.gz") else name.rsplit(".", 1)[0]
        for token in TOKEN_SPLIT.split(stem):
            if token.lower() in wanted:
                seen[token.lower()][token] += 1
    return {k: c.most_common(1)[0][0] for k, c in seen.items()}


def recognise_filename_labels(root: Path, top_dirs: list[Path], top_files: list[Path],
                              description: str):
    """Scan recogniser for labels in file names (see the module docstring)."""
    images = _image_files(root)
    if not images:
        return None
    stems = [_stem(p.name) for p in images]
    found = find_label_tokens(stems, description)
    if found is None:
        return None
    prefixes = []
    for stem, label in zip(stems, found["labels"]):
        tokens = TOKEN_SPLIT.split(stem)
        cut = tokens.index(label) if label in tokens else 0
        prefixes.append("_".join(tokens[:cut]))
    shared = Counter(prefixes)
    prefix_is_key = any(re.search(r"\d", p) for p in shared) and \
        any(count > 1 for p, count in shared.items() if p) and len(shared) > 1
    samples, skipped, sources = [], [], []
    for path, label, prefix in zip(images, found["labels"], prefixes):
        if label is None:
            skipped.append(f"{path}: no label word ({', '.join(found['vocabulary'])}) in the "
                           "file name")
            continue
        key, matched = group_of(path)
        if matched:
            group, source = key, "filename prefix"
        elif prefix_is_key and prefix:
            group, source = prefix, "filename prefix before the label"
        else:
            group, source = key, "none (one group per image)"
        sources.append(source)
        samples.append(Sample(str(path), label, group, split_of_path(path, root)))
    mapping = held_out_splits([s.split for s in samples])
    for sample in samples:
        sample.split = mapping.get(sample.split, sample.split)
    spelled = _spellings(images, found["vocabulary"])  # "AD" as the names write it, not "ad"
    for sample in samples:
        sample.label = spelled.get(sample.label, sample.label)
    counts = Counter(s.label for s in samples)
    classes = sorted(counts)
    suffix = Counter(image_suffix(Path(s.image).name) for s in samples).most_common(1)[0][0]
    fmt = FORMAT_OF_SUFFIX.get(suffix, suffix.lstrip("."))
    dimension = "3D" if fmt in ("nifti", "nrrd", "mha", "analyze") else "2D"
    if fmt in ("npy", "pt"):
        dimension = dimension_of_shape(array_shape(Path(samples[0].image))[0]) or "2D"
    splits = {s.split for s in samples}
    return ScanResult(
        root=str(root), layout="filename_labels", task="diagnosis", dimension=dimension,
        file_format=fmt, classes=classes, class_counts={c: counts[c] for c in classes},
        samples=samples, group_source=group_source(sources),
        existing_split="test" in splits and bool(splits & {"train", "val"}) and "" not in splits,
        skipped=skipped, num_files=len(images),
        details={"vocabulary": found["vocabulary"], "coverage": round(found["coverage"], 3)})
