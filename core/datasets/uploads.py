"""Unpack an uploaded dataset zip safely into ``<home>/datasets/uploads/<name>/``.

Refused, with a message naming the entry and the fix, before anything is written:

* a zip over the size limit, a file that is not a zip, an encrypted or damaged one, or one whose
  compression method Python cannot read;
* zip-slip: absolute paths (``/x``, ``C:\\x``, ``\\\\server``), ``..`` anywhere, control
  characters, the same path twice;
* links and special files (symlinks, devices, FIFOs), from the entries' Unix mode bits;
* zip bombs, from the central directory: too many entries, too many unpacked bytes, an archive
  or an entry that expands more than the ratio limit, or more than the free disk space.

The same limits are enforced again while streaming (the bytes actually inflated, never the
sizes the archive claims), and zipfile checks every entry's CRC. Everything is written into a
hidden temporary folder beside the target, which is renamed into place only when every entry is
out; on any error the temporary folder is removed, so nothing remains. Entries are written as
plain files (never links, never with the archive's permission bits). macOS metadata
(``__MACOSX/``, ``.DS_Store``) and ``Thumbs.db`` are skipped.
"""
from __future__ import annotations

import os
import re
import secrets
import shutil
import stat
import time
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from core.datasets.datacards import NAME_RE
from core.config.settings import Settings

MiB = 1024 * 1024
CHUNK = MiB
UPLOADS = "uploads"
PARTIAL_PREFIX = ".partial-"
STALE_PARTIAL_S = 6 * 3600        # a partial folder this old is left over from a crash
DISK_MARGIN = 64 * MiB
SKIPPED_PARTS = {"__MACOSX"}
SKIPPED_NAMES = {".DS_Store", "Thumbs.db", "desktop.ini"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DRIVE = re.compile(r"^[A-Za-z]:(/|$)")


class UploadError(ValueError):
    """The upload cannot be used; the message says what is wrong and how to fix it."""


@dataclass(frozen=True)
class UploadLimits:
    max_zip_bytes: int = 2048 * MiB
    max_unpacked_bytes: int = 10240 * MiB
    max_files: int = 200_000
    max_ratio: float = 250.0
    ratio_floor_bytes: int = MiB  # smaller entries (and archives) are not ratio-checked

    @classmethod
    def from_settings(cls, settings: Settings) -> "UploadLimits":
        return cls(max_zip_bytes=settings.upload_max_mb * MiB,
                   max_unpacked_bytes=settings.upload_max_unpacked_mb * MiB,
                   max_files=settings.upload_max_files, max_ratio=settings.upload_max_ratio)


@dataclass
class Unpacked:
    folder: Path            # <home>/datasets/uploads/<name>
    dataset_root: Path      # the folder to register: the zip's single top folder, else folder
    files: int
    bytes: int
    skipped: list[str] = field(default_factory=list)


def uploads_dir(settings: Settings) -> Path:
    return settings.datasets_dir / UPLOADS


def folder_name(name: str) -> str:
    """The upload folder's name for a dataset name (the datacard slug rule)."""
    name = (name or "").strip()
    if not NAME_RE.match(name):
        raise UploadError("the dataset name must be 1-80 characters: letters, digits, spaces "
                          "and ._()+- , starting with a letter or digit")
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "dataset"


def _mb(n: float) -> str:
    if n < MiB:
        return f"{n / 1024:,.0f} KB"
    return f"{n / MiB:,.1f} MB" if n < 1024 * MiB else f"{n / (1024 * MiB):,.2f} GB"


def member_path(name: str) -> PurePosixPath | None:
    """The safe relative path of an entry; None for entries to skip (folders' own entries that
    name the root, macOS metadata). Raises UploadError for anything that could escape."""
    if _CONTROL.search(name):
        raise UploadError(f"zip entry {name!r} has control characters in its name; re-create "
                          "the zip from plainly named files")
    unified = name.replace("\\", "/")
    if unified.startswith("/") or _DRIVE.match(unified):
        raise UploadError(f"zip entry {name!r} has an absolute path; the zip must hold only "
                          "relative paths (zip the folder from its parent, e.g. "
                          "`zip -r data.zip data`)")
    parts = [p for p in unified.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UploadError(f"zip entry {name!r} points outside the dataset folder ('..'); "
                          "re-create the zip without parent-folder paths")
    if not parts or parts[0] in SKIPPED_PARTS or parts[-1] in SKIPPED_NAMES:
        return None
    if any(len(p.encode("utf-8")) > 255 for p in parts):
        raise UploadError(f"zip entry {name!r} has a name part longer than 255 bytes")
    return PurePosixPath(*parts)


def _kind(info: zipfile.ZipInfo) -> str:
    """'dir', 'file', or the special kind a Unix mode says ('link', 'device', ...)."""
    mode = info.external_attr >> 16
    if info.create_system == 3 and mode:  # Unix: the mode bits say what the entry is
        fmt = stat.S_IFMT(mode)
        if stat.S_ISLNK(mode):
            return "link"
        if fmt and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            return "special file"
        if stat.S_ISDIR(mode):
            return "dir"
    return "dir" if info.is_dir() else "file"


def _archive_size(source: str | os.PathLike | BinaryIO) -> int:
    if isinstance(source, (str, os.PathLike)):
        return Path(source).stat().st_size
    position = source.tell()
    size = source.seek(0, os.SEEK_END)
    source.seek(position)
    return size


def check_archive(zf: zipfile.ZipFile, archive_bytes: int,
                  limits: UploadLimits) -> tuple[list[tuple[zipfile.ZipInfo, PurePosixPath]],
                                                 list[str]]:
    """Check the central directory. Returns the entries to write and the skipped names."""
    infos = zf.infolist()
    if len(infos) > limits.max_files:
        raise UploadError(f"the zip holds {len(infos):,} entries, more than the limit of "
                          f"{limits.max_files:,}; split the dataset or register its folder on "
                          "the server instead")
    plan: list[tuple[zipfile.ZipInfo, PurePosixPath]] = []
    skipped: list[str] = []
    seen: dict[str, str] = {}
    total = 0
    for info in infos:
        rel = member_path(info.filename)
        if rel is None:
            skipped.append(info.filename)
            continue
        kind = _kind(info)
        if kind in ("link", "special file"):
            what = "symbolic link" if kind == "link" else kind
            raise UploadError(f"zip entry {info.filename!r} is a {what}; links and special "
                              "files are not accepted. Zip the real files (plain `zip -r` "
                              "follows links; do not use --symlinks)")
        if info.flag_bits & 0x1:
            raise UploadError(f"zip entry {info.filename!r} is encrypted; upload a zip without "
                              "a password")
        key = str(rel) if kind == "file" else f"{rel}/"
        if key in seen:
            raise UploadError(f"zip entry {info.filename!r} appears twice (also as "
                              f"{seen[key]!r}); re-create the zip")
        seen[key] = info.filename
        if kind == "dir":
            plan.append((info, rel))
            continue
        total += info.file_size
        if total > limits.max_unpacked_bytes:
            raise UploadError(f"the zip unpacks to more than {_mb(limits.max_unpacked_bytes)} "
                              "(the unpacked-size limit); split the dataset, raise the limit on "
                              "the Settings page, or register its folder on the server")
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > limits.ratio_floor_bytes and ratio > limits.max_ratio:
            raise UploadError(
                f"zip entry {info.filename!r} expands {ratio:,.0f} times "
                f"({_mb(info.compress_size)} to {_mb(info.file_size)}), more than the "
                f"limit of {limits.max_ratio:,.0f} (a zip-bomb guard). If the file is genuine "
                "(e.g. uncompressed masks that are mostly zeros), raise the ratio limit on the "
                "Settings page or register the folder on the server")
        plan.append((info, rel))
    if total > limits.ratio_floor_bytes and total > limits.max_ratio * max(archive_bytes, 1):
        raise UploadError(f"the zip expands {total / max(archive_bytes, 1):,.0f} times "
                          f"({_mb(archive_bytes)} to {_mb(total)}), more than the limit of "
                          f"{limits.max_ratio:,.0f} (a zip-bomb guard); raise the ratio limit "
                          "on the Settings page if the data is genuine")
    if not any(_kind(i) == "file" for i, _ in plan):
        raise UploadError("the zip holds no files; zip the dataset folder with its images")
    return plan, skipped


def _stream(zf: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, budget: list[int],
            limits: UploadLimits) -> int:
    """Inflate one entry into a new file, counting the bytes really produced."""
    written = 0
    with zf.open(info) as src, open(target, "xb") as dst:
        while True:
            chunk = src.read(CHUNK)
            if not chunk:
                break
            written += len(chunk)
            budget[0] += len(chunk)
            if written > info.file_size:
                raise UploadError(f"zip entry {info.filename!r} inflates to more than the "
                                  f"{info.file_size:,} bytes its header declares; the zip is "
                                  "damaged or crafted")
            if budget[0] > limits.max_unpacked_bytes:
                raise UploadError(f"the zip unpacks to more than "
                                  f"{_mb(limits.max_unpacked_bytes)} (the unpacked-size limit)")
            if written > limits.ratio_floor_bytes and \
                    written > limits.max_ratio * max(info.compress_size, 1):
                raise UploadError(f"zip entry {info.filename!r} expands more than "
                                  f"{limits.max_ratio:,.0f} times (a zip-bomb guard)")
            dst.write(chunk)
    return written


def _sweep_partials(parent: Path) -> None:
    """Remove temporary folders a crashed extraction left (older than STALE_PARTIAL_S)."""
    now = time.time()
    for partial in parent.glob(f"{PARTIAL_PREFIX}*"):
        try:
            if partial.is_dir() and now - partial.stat().st_mtime > STALE_PARTIAL_S:
                shutil.rmtree(partial, ignore_errors=True)
        except OSError:
            pass


def extract_zip(source: str | os.PathLike | BinaryIO, settings: Settings, name: str,
                limits: UploadLimits | None = None) -> Unpacked:
    """Check and unpack ``source`` (a path or a seekable binary file) into
    ``<home>/datasets/uploads/<folder_name(name)>``. Raises UploadError; then nothing remains."""
    limits = limits or UploadLimits.from_settings(settings)
    slug = folder_name(name)
    parent = uploads_dir(settings)
    target = parent / slug
    if target.exists():
        raise UploadError(f"an upload named {slug!r} already exists ({target}); choose another "
                          "name, or register that folder by its path")
    try:
        size = _archive_size(source)
    except OSError as exc:
        raise UploadError(f"cannot read the uploaded file: {exc}") from exc
    if size > limits.max_zip_bytes:
        raise UploadError(f"the zip is {_mb(size)}, over the {_mb(limits.max_zip_bytes)} limit; "
                          "split the dataset, or copy it to the server and register its "
                          "folder by path")
    if size == 0:
        raise UploadError("the uploaded file is empty; upload a .zip of the dataset folder")
    parent.mkdir(parents=True, exist_ok=True)
    _sweep_partials(parent)
    partial = parent / f"{PARTIAL_PREFIX}{slug}-{secrets.token_hex(4)}"
    opened = False
    try:
        with zipfile.ZipFile(source) as zf:
            opened = True
            plan, skipped = check_archive(zf, size, limits)
            need = sum(i.file_size for i, _ in plan)
            free = shutil.disk_usage(parent).free
            if need + DISK_MARGIN > free:
                raise UploadError(f"not enough disk space: the zip unpacks to {_mb(need)} and "
                                  f"{_mb(free)} is free under {parent}")
            partial.mkdir()
            budget, files = [0], 0
            for info, rel in plan:
                dest = partial.joinpath(*rel.parts)
                if _kind(info) == "dir":
                    dest.mkdir(parents=True, exist_ok=True)
                    continue
                dest.parent.mkdir(parents=True, exist_ok=True)
                _stream(zf, info, dest, budget, limits)
                files += 1
        if target.exists():
            raise UploadError(f"an upload named {slug!r} appeared while unpacking; choose "
                              "another name")
        os.rename(partial, target)
    except UploadError:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    except zipfile.BadZipFile as exc:
        shutil.rmtree(partial, ignore_errors=True)
        if opened:
            raise UploadError(f"the zip is damaged ({exc}); re-create it and upload it "
                              "again") from exc
        raise UploadError(f"the file is not a readable zip ({exc}); upload a .zip made with "
                          "your system's 'compress' or `zip -r`") from exc
    except NotImplementedError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise UploadError(f"the zip uses a compression method Python cannot read ({exc}); "
                          "re-create it with standard Deflate compression") from exc
    except (RuntimeError, EOFError, zlib.error, OSError, ValueError) as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise UploadError(f"the zip could not be unpacked ({type(exc).__name__}: {exc}); "
                          "check the file and upload it again") from exc
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    tops = list(target.iterdir())
    root = tops[0] if len(tops) == 1 and tops[0].is_dir() else target
    return Unpacked(folder=target, dataset_root=root, files=files, bytes=budget[0],
                    skipped=skipped)


def is_upload(settings: Settings, path: str | os.PathLike) -> bool:
    """Whether ``path`` is (inside) an unpacked upload of this home."""
    try:
        Path(path).resolve().relative_to(uploads_dir(settings).resolve())
    except ValueError:
        return False
    return True


def upload_folder_of(settings: Settings, path: str | os.PathLike) -> Path | None:
    """The ``uploads/<name>`` folder holding ``path``, or None when it is not an upload."""
    base = uploads_dir(settings).resolve()
    try:
        rel = Path(path).resolve().relative_to(base)
    except ValueError:
        return None
    if not rel.parts or rel.parts[0].startswith(PARTIAL_PREFIX):
        return None
    return base / rel.parts[0]


def remove_upload(settings: Settings, folder: str | os.PathLike) -> bool:
    """Delete an unpacked upload (only ever a direct child of the uploads folder)."""
    folder = Path(folder)
    if folder.is_symlink() or upload_folder_of(settings, folder) != folder.resolve():
        raise UploadError(f"{folder} is not an upload folder of this home; nothing was deleted")
    if not folder.exists():
        return False
    shutil.rmtree(folder)
    return True


def unregistered_uploads(settings: Settings, card_paths: list[str | os.PathLike]) -> list[Path]:
    """Upload folders that no datacard points into (e.g. a draft that was never saved)."""
    parent = uploads_dir(settings)
    if not parent.is_dir():
        return []
    used = {upload_folder_of(settings, p) for p in card_paths}
    return sorted(p for p in parent.iterdir()
                  if p.is_dir() and not p.name.startswith(PARTIAL_PREFIX)
                  and p.resolve() not in used)
