"""Reading one image reference for validation: its geometry (spatial size, spacing) from the
header, or in full with its pixels; and comparing a mask's geometry and values with its image's.

Reading uses the field's libraries (PIL, nibabel, SimpleITK, pydicom) directly and falls back
to the templates' reader (``core.imaging.image_io``) for array elements, series manifests and
anything else, so what validates is what training can read. Nothing is written.

May import: core.imaging, core.datasets.layouts.types."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.datasets.layouts import links
from core.datasets.layouts.types import Sample, image_suffix
from core.imaging import refs
from core.imaging.image_io import read_image

RASTER = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")
NIFTI = (".nii", ".nii.gz")
ITK = (".nrrd", ".nhdr", ".mha", ".mhd", ".hdr")
DICOM = (".dcm", ".dicom", ".ima")
PICKLES = (".pck", ".pkl", ".pickle")
SPACING_REL_TOL = 1e-3


@dataclass
class Geometry:
    size: tuple[int, ...]               # spatial size, x first (columns, rows, slices)
    spacing: tuple[float, ...] | None   # mm per spatial axis, when the format has it


class Unreadable(Exception):
    """A file that cannot be read; the message says why."""


def ref_parts(ref: str) -> tuple[Path, str]:
    """(file, element) of a reference: ``file.npz::key[3]`` -> (file.npz, "key[3]")."""
    if "::" in ref:
        file, element = ref.split("::", 1)
        return Path(file), element
    return Path(ref), ""


def read_ref(ref: str, full: bool, allow_pickle: bool) -> tuple[Geometry | None, np.ndarray | None]:
    """Geometry (and with ``full`` the pixel array) of one image reference. Raises Unreadable.
    Returns (None, None) for a header-only read of a kind whose header is not cheap to read."""
    path, element = ref_parts(ref)
    suffix = image_suffix(path.name)
    try:
        if element or suffix in (".npy", ".npz", ".pt", ".pth") + PICKLES or \
                path.name.endswith(".series.json"):
            if suffix in PICKLES and not allow_pickle:
                return None, None  # refused by the pickle check, never unpickled here
            if not full:
                return None, None
            return _via_template_reader(ref, allow_pickle)
        if path.is_dir():
            return _read_slices(path, full, allow_pickle)
        if suffix in RASTER:
            from PIL import Image
            with Image.open(path) as img:
                size = tuple(img.size)
                array = None
                if full:
                    img.load()
                    array = np.asarray(img)
            return Geometry(size, None), array
        if suffix in NIFTI:
            import nibabel
            img = nibabel.load(str(path))
            shape = tuple(int(s) for s in img.shape)
            zooms = tuple(float(z) for z in img.header.get_zooms()[:min(3, len(shape))])
            array = np.asanyarray(img.dataobj) if full else None
            return Geometry(shape[:3], zooms), array
        if suffix in ITK:
            import SimpleITK as sitk
            if full:
                image = sitk.ReadImage(str(path))
                # a copy: a view would point into the image's buffer, freed with the image
                return (Geometry(tuple(image.GetSize()), tuple(image.GetSpacing())),
                        sitk.GetArrayFromImage(image))
            reader = sitk.ImageFileReader()
            reader.SetFileName(str(path))
            reader.ReadImageInformation()
            return Geometry(tuple(reader.GetSize()), tuple(reader.GetSpacing())), None
        if suffix in DICOM:
            import pydicom
            ds = pydicom.dcmread(str(path), stop_before_pixels=not full)
            size = (int(ds.Columns), int(ds.Rows))
            frames = int(getattr(ds, "NumberOfFrames", 1) or 1)
            size = size + (frames,) if frames > 1 else size
            spacing = getattr(ds, "PixelSpacing", None)
            geometry = Geometry(size, (float(spacing[1]), float(spacing[0])) if spacing else None)
            return geometry, (ds.pixel_array if full else None)
        if not full:
            return None, None
        return _via_template_reader(ref, allow_pickle)
    except Unreadable:
        raise
    except Exception as exc:  # any decoder error means the file is unusable
        raise Unreadable(f"{type(exc).__name__}: {str(exc)[:160]}") from exc


def _read_slices(folder: Path, full: bool, allow_pickle: bool):
    """A folder of 2D slices (one 3D image): the first slice's geometry, the slice count last."""
    slices = sorted(p for p in links.iterdir(folder) if p.is_file()
                    and not p.name.startswith("."))
    if not slices:
        raise Unreadable("folder without slice files")
    geometry, array = read_ref(str(slices[0]), full, allow_pickle)
    if geometry is None:
        return None, array
    return Geometry(geometry.size[:2] + (len(slices),), geometry.spacing), array


def _via_template_reader(ref: str, allow_pickle: bool):
    array, meta = read_image(ref, allow_pickle=allow_pickle)
    spacing = tuple(float(s) for s in meta["spacing"]) if meta.get("spacing") else None
    return Geometry(tuple(int(s) for s in meta["spatial_shape"]), spacing), array


def sample_refs(sample: Sample) -> list[str]:
    """The references to read for a sample: its file, folder, or channel files; for a DICOM
    series sharing its folder with others, the series' first file (not the folder's)."""
    if sample.extra.get("series_files"):
        return [str(sample.extra["series_files"][0])]
    return [str(p) for p in sample.image] if isinstance(sample.image, list) else [str(sample.image)]


def ref_exists(ref: str) -> bool:
    """Whether every file the reference reads exists (core.imaging.refs.ref_files: an
    element's array file, a folder's slices, a manifest's DICOM files)."""
    return refs.ref_exists(ref)


def _same_spacing(a: tuple[float, ...] | None, b: tuple[float, ...] | None) -> bool:
    if a is None or b is None:
        return True
    return all(math.isclose(x, y, rel_tol=SPACING_REL_TOL, abs_tol=1e-6) for x, y in zip(a, b))


def geometry_error(image: Geometry, mask: Geometry) -> str | None:
    n = len(mask.size)
    if tuple(image.size[:n]) != tuple(mask.size) and tuple(image.size) != tuple(mask.size):
        return f"size {list(mask.size)} but its image is {list(image.size)}"
    if not _same_spacing(image.spacing, mask.spacing):
        return (f"spacing {[round(s, 4) for s in mask.spacing]} mm but its image has "
                f"{[round(s, 4) for s in image.spacing]} mm")
    return None


def distinct_values(array: np.ndarray) -> tuple[list[float], bool]:
    """The distinct values of a mask, and whether all of them are whole numbers."""
    values = np.unique(np.asarray(array))
    whole = bool(np.all(np.mod(values, 1) == 0)) if values.dtype.kind == "f" else True
    return [float(v) if values.dtype.kind == "f" else int(v) for v in values[:50]], whole
