"""Arrays as images: which axis holds the channels (array_layout), and reading array files and
their elements (npy, npz, pt and, only when the caller allows it, pickles), with a bounded
per-process cache of whole containers for element references.

May import: core.imaging.refs, numpy and torch."""
from __future__ import annotations

import pickle
from collections import OrderedDict
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from core.imaging.refs import ELEMENT_RE, ImageReadError, PICKLE_REFUSED, PICKLE_SUFFIXES, suffix_of

_CACHE_BYTES = 1 << 30  # whole arrays kept per process for element refs (npz keys, .pt, pickles)


def _channel_rule(shape: Sequence[int]) -> str:
    """How a stored array holds channels: "none" (add one), "first" or "last"."""
    if len(shape) == 2:
        return "none"
    if len(shape) == 3:
        if shape[-1] in (3, 4) and min(shape[:2]) > 4:
            return "last"
        if shape[0] == 1:
            return "first"
        return "none"
    if len(shape) == 4:
        if shape[0] <= 4:
            return "first"
        if shape[-1] <= 4:
            return "last"
    return "invalid"


def array_layout(shape: Sequence[int], ref: str = "") -> tuple[list[int], int]:
    """(spatial shape, channels) of a stored array shape, by the rule in core.imaging.image_io's
    module docstring."""
    rule = _channel_rule(shape)
    if rule == "invalid":
        raise ImageReadError(f"{ref}: an array of shape {tuple(shape)} is not a 2D or 3D image "
                             "(expected (H, W), (H, W, 3), (1, H, W), (D, H, W) or "
                             "(C, D, H, W))")
    shape = [int(s) for s in shape]
    if rule == "none":
        return shape, 1
    return (shape[1:], shape[0]) if rule == "first" else (shape[:-1], shape[-1])


def array_channels_first(arr: np.ndarray, ref: str = "") -> np.ndarray:
    """Stored array -> (C, *spatial) by the layout rule in the module docstring."""
    array_layout(arr.shape, ref)  # raises for shapes that are no image
    rule = _channel_rule(arr.shape)
    return arr[None] if rule == "none" else arr if rule == "first" else np.moveaxis(arr, -1, 0)


def _nbytes(value: Any) -> int:
    """Memory an object loaded from an array file holds (a memory map: none)."""
    if isinstance(value, np.memmap):
        return 0
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    if hasattr(value, "element_size") and hasattr(value, "nelement"):  # a torch tensor
        return int(value.element_size() * value.nelement())
    return 0


class _ArrayCache:
    """Loaded array files (and npz members) for element refs, by (file, modification time[,
    key]); least recently used out first, at most ``max_items`` entries (open files) and
    ``limit`` bytes: many refs into one large array file load it once per process."""

    def __init__(self, limit: int = _CACHE_BYTES, max_items: int = 32):
        self.limit, self.max_items = limit, max_items
        self.items: OrderedDict = OrderedDict()
        self.size = 0

    def get(self, key: tuple, load):
        if key in self.items:
            self.items.move_to_end(key)
            return self.items[key][0]
        value = load()
        nbytes = _nbytes(value)
        if nbytes <= self.limit:
            while self.items and (self.size + nbytes > self.limit or
                                  len(self.items) >= self.max_items):
                _, (_, old) = self.items.popitem(last=False)
                self.size -= old
            self.items[key] = (value, nbytes)
            self.size += nbytes
        return value


_ARRAYS = _ArrayCache()

_NO_CACHE = _ArrayCache(limit=-1)  # stores nothing: whole-file refs are read once each


def _to_numpy(value: Any, ref: str) -> np.ndarray:
    if type(value).__name__ == "Dataset" and hasattr(value, "shape") and hasattr(value, "dtype"):
        value = value[()]   # an HDF5 dataset named whole
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise ImageReadError(f"{ref}: holds Python objects, not an image array")
        return value
    try:
        import torch
        if isinstance(value, torch.Tensor):
            return value.detach().cpu().float().numpy() if value.dtype == torch.bfloat16 \
                else value.detach().cpu().numpy()
    except ImportError:  # pragma: no cover - torch is a template dependency
        pass
    if isinstance(value, (list, tuple)) and value and all(np.isscalar(v) for v in value):
        return np.asarray(value)
    raise ImageReadError(f"{ref}: holds a {type(value).__name__}, not an image array; name an "
                         "array in it as file::key or file::key[index]")


def _load_container(path: Path, allow_pickle: bool, ref: str, cache: bool) -> Any:
    """The object stored in an array file: ndarray (npy, memory-mapped), NpzFile, tensor or
    dict/list of them (pt, pickle). ``cache``: keep it for further element refs."""
    suffix = suffix_of(path)
    if suffix in PICKLE_SUFFIXES and not allow_pickle:
        raise ImageReadError(PICKLE_REFUSED.format(ref=ref))
    if not path.is_file():
        raise FileNotFoundError(f"{ref}: {path} does not exist")
    stamp = (str(path), path.stat().st_mtime_ns)
    store = _ARRAYS if cache else _NO_CACHE
    if suffix == ".npy":
        def load():
            try:
                return np.load(path, mmap_mode="r", allow_pickle=False)
            except ValueError as exc:
                raise ImageReadError(f"{ref}: {path.name} holds pickled Python objects, not "
                                     "a plain array; save it with allow_pickle=False") from exc
        return store.get(stamp, load)
    if suffix == ".npz":
        return store.get(stamp, lambda: np.load(path, allow_pickle=False))
    if suffix in (".h5", ".hdf5"):
        def load_h5():   # elements are read from the open file one by one (h5py slicing)
            import h5py
            try:
                return h5py.File(path, "r")
            except OSError as exc:
                raise ImageReadError(f"{ref}: not a readable HDF5 file ({exc})") from exc
        return store.get(stamp, load_h5)
    if suffix in (".pt", ".pth"):
        import torch

        def load_pt():
            try:
                return torch.load(path, map_location="cpu", weights_only=True)
            except Exception as exc:
                raise ImageReadError(f"{ref}: not a tensor file torch.load(weights_only=True) "
                                     f"accepts ({type(exc).__name__}: {str(exc)[:160]})") from exc
        return store.get(stamp, load_pt)

    def load_pickle():
        with open(path, "rb") as handle:
            try:
                return pickle.load(handle)  # noqa: S301 - allowed only for registered datasets
            except Exception as exc:
                raise ImageReadError(f"{ref}: cannot be unpickled ({type(exc).__name__}: "
                                     f"{str(exc)[:160]})") from exc
    return store.get(stamp, load_pickle)


def _select(container: Any, key: str, index: str | None, ref: str, stamp: tuple,
            store: _ArrayCache) -> np.ndarray:
    """container[key][index] as an ndarray (npz members loaded once into ``store``)."""
    value = container
    if key:
        try:
            if isinstance(container, np.lib.npyio.NpzFile):
                value = store.get((*stamp, key), lambda: container[key])
            elif isinstance(container, (list, tuple)):
                value = container[int(key)]
            else:
                value = container[key]
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            keys = list(getattr(container, "keys", lambda: [])())[:10]
            raise ImageReadError(f"{ref}: no array {key!r} in the file (keys: {keys})") from exc
    elif isinstance(container, np.lib.npyio.NpzFile) or isinstance(container, dict):
        keys = list(container.keys())
        if len(keys) != 1:
            raise ImageReadError(f"{ref}: the file holds {len(keys)} arrays {keys[:10]}; name "
                                 "one as file::key or file::key[index]")
        value = store.get((*stamp, keys[0]), lambda: container[keys[0]]) \
            if isinstance(container, np.lib.npyio.NpzFile) else container[keys[0]]
    if index is not None:
        try:
            value = value[int(index)]
        except (IndexError, TypeError) as exc:
            length = len(value) if hasattr(value, "__len__") else "no"
            raise ImageReadError(f"{ref}: index {index} is out of range ({length} "
                                 "elements)") from exc
    return _to_numpy(value, ref)


def read_array_ref(ref: str, allow_pickle: bool) -> tuple[np.ndarray, dict]:
    """An array file, or an element of one (whose file stays cached for the next element)."""
    match = ELEMENT_RE.match(ref)
    path = Path(match.group("file") if match else ref)
    key = match.group("key").strip() if match else ""
    index = match.group("index") if match else None
    container = _load_container(path, allow_pickle, ref, cache=bool(match))
    stamp = (str(path), path.stat().st_mtime_ns)
    arr = _select(container, key, index, ref, stamp, _ARRAYS if match else _NO_CACHE)
    arr = array_channels_first(np.asarray(arr), ref)
    return arr, {"format": suffix_of(path).lstrip(".")}


def map_label_values(array, label_values):
    """A mask whose labels are stored as other values (a binary mask as 0/255: ``label_values``
    [255]) as labels 1..N: value ``label_values[i]`` becomes i + 1, anything else 0. Unchanged
    when ``label_values`` is empty. NumPy arrays and torch tensors alike."""
    if not label_values:
        return array
    out = array * 0
    for i, value in enumerate(label_values):
        out[array == value] = i + 1
    return out
