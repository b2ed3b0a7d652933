"""Symbolic links in a dataset folder: which ones a scan reads and which it skips.

A scan (core.datasets.layouts.dispatch.scan_folder) never follows a link it cannot use, and
never fails on one. Skipped, each with a warning that names it (registration shows them):

* a link loop: ``a -> b`` with ``b -> a``, a link to itself, or a folder link to the folder
  that holds it or to one above it (``sub/up -> ..``), which would make a walk endless;
* a dangling link (its target does not exist);
* a link whose target lies outside the dataset folder: the index, the path jail and the
  confinement of the job's scripts all stay inside the registered folder, so a file reached
  through such a link would be unreadable (or, worse, read from elsewhere) later.

Links to files or folders inside the dataset folder are read as before; as with ``os.walk``,
walks list a folder link but do not descend into it. Nothing is ever written in the folder.

The helpers mirror what the scanners used (``os.walk``, ``os.scandir``, ``Path.iterdir`` and
globs) and only ever ``lstat``/``stat`` a link (``DirEntry.is_symlink`` costs no system call),
so a 100,000-file folder without links is listed as fast as before.

May import: nothing of the app.
"""
from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

MAX_NAMED = 20  # skipped links a warning names one by one (the rest are counted)

_SCAN = threading.local()  # the dataset folder of the scan running in this thread, and its skips


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


@contextmanager
def watching(root: str | os.PathLike):
    """Within it, links are judged against ``root`` (the dataset folder) and each one skipped is
    remembered for ``skipped_links``. A nested call for the same folder shares the outer
    scan's record; one for another folder has its own until it ends."""
    outer = getattr(_SCAN, "state", None)
    real = os.path.realpath(os.fspath(root))
    if outer is None or outer["root"] != real:
        _SCAN.state = {"root": real, "skipped": {}, "judged": {}}
    try:
        yield
    finally:
        _SCAN.state = outer


def skipped_links() -> dict[str, str]:
    """{path: why} of the links the scan running in this thread skipped so far."""
    state = getattr(_SCAN, "state", None)
    return dict(state["skipped"]) if state else {}


def link_problem(path: str | os.PathLike, root: str | None = None) -> str | None:
    """Why the symlink ``path`` must not be followed (None when it may be, or is no link).
    ``root``: the dataset folder (default: the scan's)."""
    path = os.fspath(path)
    try:
        target = os.readlink(path)
    except OSError:
        return None  # not a link (or gone): the caller's own checks apply
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"a symlink loop (-> {target})"
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return f"a dangling symlink (-> {target}, which does not exist)"
        return f"a symlink that cannot be followed (-> {target}: {exc.strerror})"
    real = os.path.realpath(path)
    state = getattr(_SCAN, "state", None)
    root = root or (state["root"] if state else None)
    if root and not _within(real, root):
        return f"a symlink to {real}, outside the dataset folder"
    if os.path.isdir(real) and _within(os.path.realpath(os.path.dirname(path)), real):
        return f"a symlink loop (a folder link to a folder that holds it: -> {target})"
    return None


def skip(path: str | os.PathLike) -> bool:
    """True (and remembered with its reason) when ``path`` is a link the scan must not
    follow. Call it only for links (``DirEntry.is_symlink``, ``Path.is_symlink``)."""
    state = getattr(_SCAN, "state", None)
    key = os.fspath(path)
    if state is not None and key in state["judged"]:  # a scan walks a folder several times
        return state["judged"][key]
    why = link_problem(path)
    if state is not None:
        state["judged"][key] = why is not None
        if why is not None:
            state["skipped"].setdefault(key, why)
    return why is not None


def usable(path: str | os.PathLike) -> bool:
    """False for a link the scan must not follow; True for anything else."""
    return not (os.path.islink(path) and skip(path))


def kept(paths: Iterable[Path]) -> list[Path]:
    """``paths`` without the links the scan must not follow (e.g. a glob's result)."""
    return [p for p in paths if usable(p)]


@contextmanager
def scandir(folder: str | os.PathLike):
    """``os.scandir(folder)`` without the links the scan must not follow."""
    with os.scandir(folder) as it:
        yield (e for e in it if not (e.is_symlink() and skip(e.path)))


def iterdir(folder: Path) -> list[Path]:
    """``folder.iterdir()`` without the links the scan must not follow."""
    with scandir(folder) as it:
        return [Path(e.path) for e in it]


def walk(root: str | os.PathLike) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk(root)`` (top-down, links not descended, unreadable folders passed over)
    without the links the scan must not follow. Trim ``dirs`` in place to prune, as with
    os.walk."""
    stack = [os.fspath(root)]
    while stack:
        top = stack.pop()
        dirs, files, linked = [], [], set()
        try:
            with scandir(top) as it:
                for entry in it:
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    (dirs if is_dir else files).append(entry.name)
                    if is_dir and entry.is_symlink():
                        linked.add(entry.name)
        except OSError:
            continue
        yield top, dirs, files
        stack.extend(os.path.join(top, d) for d in reversed(dirs) if d not in linked)


def describe(skipped: dict[str, str], root: str | os.PathLike) -> str:
    """One warning naming each skipped link (the first MAX_NAMED) and why."""
    root = os.fspath(root)
    named = [f"{os.path.relpath(p, root)}: {why}" for p, why in sorted(skipped.items())]
    more = f"; and {len(named) - MAX_NAMED} more" if len(named) > MAX_NAMED else ""
    return (f"{len(named)} symlink(s) in the dataset folder were skipped and are not part of "
            f"the dataset: {'; '.join(named[:MAX_NAMED])}{more}. Replace each with the file it "
            "should point to (inside the folder), or remove it, if its data is needed")
