"""Shapes of arrays read from their headers only (npy, npz, pt and, when trusted, pickles): what
a scan needs to know about array files without loading them.

May import: the standard library, numpy/torch and SimpleITK only."""
from __future__ import annotations

import importlib
import pickle
import warnings
import zipfile
from pathlib import Path

import numpy as np

ARRAY_SUFFIXES = (".npy", ".pt", ".pth", ".pck", ".pkl", ".pickle")

PICKLE_SUFFIXES = (".pck", ".pkl", ".pickle")

PICKLE_WARNING = ("the volumes are Python pickles: reading them runs code stored in the files, "
                  "so only use them if you trust where they came from")


# --------------------------------------------------------------------------- shapes, safely
def dimension_of_shape(shape: tuple[int, ...] | None) -> str:
    """"2D" or "3D" for one sample's array shape; a leading or trailing axis of 1, 3 or 4 next
    to two large ones is taken for channels ((3, 224, 224), (28, 28, 1) -> 2D)."""
    if not shape:
        return ""
    dims = [int(d) for d in shape]
    if len(dims) <= 2:
        return "2D"
    if len(dims) == 3:
        if dims[0] in (1, 3, 4) and min(dims[1:]) > 4:
            return "2D"
        if dims[-1] in (1, 3, 4) and min(dims[:2]) > 4:
            return "2D"
    return "3D"


class _ArrayOnlyUnpickler(pickle.Unpickler):
    """Rebuilds NumPy arrays and nothing else: any other global in the pickle is refused."""

    ALLOWED = {("numpy.core.multiarray", "_reconstruct"),
               ("numpy._core.multiarray", "_reconstruct"), ("numpy", "ndarray"),
               ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
               ("numpy._core.multiarray", "scalar"),
               ("_codecs", "encode")}  # how protocol-2 pickles store the raw bytes

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"refusing {module}.{name}: only NumPy arrays are read")
        if module.startswith("numpy.core"):
            module = module.replace("numpy.core", "numpy._core", 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return getattr(importlib.import_module(module), name)


def _first_array_shape(obj) -> tuple[int, ...] | None:
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):
        return tuple(int(d) for d in obj.shape)
    if isinstance(obj, dict):
        for value in obj.values():
            if (shape := _first_array_shape(value)) is not None:
                return shape
    if isinstance(obj, (list, tuple)):
        for value in obj[:4]:
            if (shape := _first_array_shape(value)) is not None:
                return shape
    return None


def array_shape(path: Path) -> tuple[tuple[int, ...] | None, bool]:
    """(shape, needs_pickle) of one per-sample array file, read without running pickled code.
    ``needs_pickle`` is True when the file can only be read by unpickling it."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            try:
                return tuple(np.load(path, mmap_mode="r", allow_pickle=False).shape), False
            except ValueError:  # an object array: a pickle inside the .npy
                return None, True
        if suffix in (".pt", ".pth"):
            import torch
            try:
                obj = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError:  # the legacy format cannot be memory-mapped
                obj = torch.load(path, map_location="cpu", weights_only=True)
            return _first_array_shape(obj), False
        if suffix in PICKLE_SUFFIXES:
            with open(path, "rb") as handle:
                obj = _ArrayOnlyUnpickler(handle, encoding="latin1").load()
            return _first_array_shape(obj), True
    except Exception:  # unreadable without trusting the file: the shape stays unknown
        return None, suffix in PICKLE_SUFFIXES + (".pt", ".pth")
    return None, False


# --------------------------------------------------------------------------- .npz files
def npz_headers(path: Path) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """{key: (shape, dtype)} of every array in an .npz, from the headers only."""
    out = {}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if not info.filename.endswith(".npy"):
                continue
            with archive.open(info) as handle:
                version = np.lib.format.read_magic(handle)
                reader = (np.lib.format.read_array_header_1_0 if version == (1, 0) else
                          np.lib.format.read_array_header_2_0)
                shape, _, dtype = reader(handle)
            out[info.filename[:-4]] = (tuple(shape), dtype)
    return out


def h5_headers(path: Path) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """{dataset path: (shape, dtype)} of every dataset in an HDF5 file (metadata only)."""
    import h5py
    out = {}
    with h5py.File(path, "r") as handle:
        def visit(name, item):
            if isinstance(item, h5py.Dataset):
                out[name] = (tuple(int(n) for n in item.shape), item.dtype)
        handle.visititems(visit)
    return out


def container_headers(path: Path) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """The arrays of an ``.npz`` or HDF5 file by key, from headers only."""
    if path.name.lower().endswith((".h5", ".hdf5")):
        return h5_headers(path)
    return npz_headers(path)


def header_dimension(path: Path) -> str:
    """"2D" or "3D" from a NIfTI/MetaImage/NRRD/Analyze file's header (SimpleITK reads the
    header only), "" when it cannot be read: a 2D .mha (NODE21) is not a volume because of its
    suffix, and a 3D file of one slice is 2D."""
    try:
        import SimpleITK as sitk
        reader = sitk.ImageFileReader()
        reader.SetFileName(str(path))
        reader.ReadImageInformation()
        size = reader.GetSize()
    except Exception:   # noqa: BLE001 - any unreadable header: no answer
        return ""
    return "2D" if len(size) == 2 or (len(size) == 3 and size[2] == 1) else "3D"
