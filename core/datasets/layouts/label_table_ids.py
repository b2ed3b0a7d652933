"""Which image file(s) a label-table cell names: ``IdMatcher`` matches a cell to files by
relative path (or its longest unambiguous trailing part), file name, stem, slice folder, or an
ID that is a run of the file stem's tokens.

May import: core.datasets.layouts.types (it needs nothing of the project today)."""
from __future__ import annotations

import os
import re
from collections import defaultdict
from pathlib import Path

VOLUME_NAME = re.compile(r"\.(?:nii|nii\.gz|nrrd|nhdr|mha|mhd|img|hdr|mnc)$", re.I)

# a word an id carries to say what it names (``<uid>_image``, ``<uid>_study``)
KIND_WORD = re.compile(r"[_\-](?:image|img|study|series|scan|file|dcm)$", re.I)
TOKEN_SPLIT = re.compile(r"[_\-\s.]+")
MAX_TOKENS = 6           # longest token run an ID may be (``ADNI_002_S_0295``)


def _name_forms(name: str) -> set[str]:
    """A file name, without its suffix, and without everything after the first dot."""
    forms = {name, name.split(".")[0]}
    if name.endswith(".nii.gz"):
        forms.add(name[:-7])
    elif "." in name:
        forms.add(name.rsplit(".", 1)[0])
    return {f for f in forms if f}


def _tokens(text: str) -> tuple[str, ...]:
    return tuple(t for t in TOKEN_SPLIT.split(text) if t)


class IdMatcher:
    """Which image file(s) a table cell names.

    Exact forms are tried first: the relative path from the dataset folder or its longest
    unambiguous trailing part, the file name, the stem — or a folder of slices. Then, for IDs,
    a run of the file stem's tokens (``I12345`` -> ``ADNI_002_S_0295_I12345.pt``; ``case7`` ->
    ``case7_view1.png`` and ``case7_view2.png``). A name several files share is refused unless
    more of the path tells them apart.
    """

    def __init__(self, images: list[Path], root: Path):
        self.root = root
        self.images = images
        self._exact: dict[str, Path | None] = {}   # None: several files share the key
        self._many: dict[str, list[Path]] = {}     # ... and which files those are
        self._dirs: dict[str, Path | None] = {}
        self.members: dict[Path, list[Path]] = {}   # a folder's 2D images, in name order
        folders = set()
        prefix = os.path.join(str(root), "")  # string slicing: relative_to is slow at 100k files
        for path in images:
            text = str(path)
            rel = text[len(prefix):].replace(os.sep, "/") if text.startswith(prefix) else \
                path.relative_to(root).as_posix()
            parts = rel.lower().split("/")
            head_forms = _name_forms(parts[-1])
            for k in range(1, len(parts) + 1):
                head = "/".join(parts[-k:-1])
                for form in head_forms:
                    self._add_exact(f"{head}/{form}" if head else form, path)
            if len(parts) > 1 and not VOLUME_NAME.search(parts[-1]):
                folders.add(path.parent)   # a folder of 2D slices is a scan; of volumes, not
                self.members.setdefault(path.parent, []).append(path)
        self._cases: dict[str, Path | None] = {}
        self.series: dict[Path, list[Path]] = {}   # a case folder's series (slice folders)
        for folder in folders:
            parts = folder.relative_to(root).as_posix().lower().split("/")
            for k in range(1, len(parts) + 1):
                self._add(self._dirs, "/".join(parts[-k:]), folder)
            if len(parts) > 1:   # RSNA-MICCAI: 00012/{FLAIR,T1w,T1wCE,T2w}/Image-1.dcm
                self.series.setdefault(folder.parent, []).append(folder)
        for case, series in self.series.items():
            if len(series) < 2:
                continue
            parts = case.relative_to(root).as_posix().lower().split("/")
            for k in range(1, len(parts) + 1):
                self._add(self._cases, "/".join(parts[-k:]), case)
            if parts[-1].isdigit() and parts[-1].lstrip("0"):   # "12" names folder 00012
                self._add(self._cases, parts[-1].lstrip("0"), case)
        self._runs: dict[tuple[str, ...], list[Path]] | None = None

    def _add_exact(self, key: str, path: Path) -> None:
        known = self._exact.get(key, False)
        if known is False:
            self._exact[key] = path
        elif known != path:
            many = self._many.setdefault(key, [known] if known is not None else [])
            if path not in many:
                many.append(path)
            self._exact[key] = None

    def near(self, value: object, folder: Path) -> Path | None:
        """The one file a cell names among several of that name, the one under ``folder``
        (RFMiD: ``1`` is ``Training/1.png`` for the table in the training set's folder, and
        ``Validation/1.png`` for the validation table); None when that does not decide."""
        if not isinstance(value, str) or not value or len(value) > 1000:
            return None
        parts = [p for p in self._normal(value).split("/") if p and p != "."]
        for k in range(len(parts), 0, -1):
            found = [p for p in self._many.get("/".join(parts[-k:]), []) if folder in p.parents]
            if found:
                return found[0] if len(found) == 1 else None
        return None

    @staticmethod
    def _add(table: dict, key: str, path: Path) -> None:
        if key in table and table[key] != path:
            table[key] = None
        else:
            table.setdefault(key, path)

    @staticmethod
    def _normal(value: str) -> str:
        text = value.strip().strip("'\"").replace("\\", "/").lower()
        text = re.sub(r"^(?:\./)+", "", text)
        return text.strip("/")

    def exact(self, value: object) -> Path | None:
        """The one file (or slice folder) the cell names by path, name or stem; else None."""
        if not isinstance(value, str) or not value or len(value) > 1000:
            return None
        quick = self._exact.get(value.lower(), False)  # most cells: a plain name or stem
        if quick is not False:
            return quick
        parts = [p for p in self._normal(value).split("/") if p and p != "."]
        for table in (self._exact, self._dirs):
            for k in range(len(parts), 0, -1):
                key = "/".join(parts[-k:])
                if key in table:
                    return table[key]   # None when ambiguous: a shorter part is too
        return None

    def _run_index(self) -> dict[tuple[str, ...], list[Path]]:
        if self._runs is None:
            runs: dict[tuple[str, ...], list[Path]] = defaultdict(list)
            for path in self.images:
                stem = path.name.lower()
                stem = stem[:-7] if stem.endswith(".nii.gz") else stem.rsplit(".", 1)[0]
                tokens = _tokens(stem)
                seen = set()
                for i in range(len(tokens)):
                    for j in range(i + 1, min(len(tokens), i + MAX_TOKENS) + 1):
                        if tokens[i:j] not in seen:
                            seen.add(tokens[i:j])
                            runs[tokens[i:j]].append(path)
            self._runs = dict(runs)
        return self._runs

    def by_id(self, value: object) -> list[Path]:
        """Files whose stem holds the cell as a whole run of tokens (an ID)."""
        if not isinstance(value, str):
            return []
        text = self._normal(value).rsplit("/", 1)[-1]
        tokens = _tokens(text)
        if not tokens or len(tokens) > MAX_TOKENS or (text.isdigit() and len(text) < 3):
            return []
        return self._run_index().get(tokens, [])

    def case_series(self, value: object) -> list[Path]:
        """The series folders of the case folder a cell names (its id with or without
        leading zeros), in name order; [] when it names none."""
        if not isinstance(value, str) or not value.strip() or len(value) > 1000:
            return []
        parts = [p for p in self._normal(value).split("/") if p and p != "."]
        for k in range(len(parts), 0, -1):
            case = self._cases.get("/".join(parts[-k:]))
            if case is not None:
                return sorted(self.series[case])
        return []

    def find(self, value: object, use_ids: bool, near: str | Path | None = None) -> list[Path]:
        """The file(s) a cell names; ``near`` (the folder of the table the cell is in) decides
        between files of one name in several folders."""
        hit = self.exact(value)
        if hit is None and near:
            hit = self.near(value, Path(near))
        if hit is None and isinstance(value, str):   # SIIM-FISABIO-RSNA's 7f8b48feddfc_image
            bare = KIND_WORD.sub("", value.strip())
            hit = self.exact(bare) if bare and bare != value.strip() else None
        if hit is not None:
            return [hit]
        series = self.case_series(value)
        if series:
            return series
        return self.by_id(value) if use_ids else []
