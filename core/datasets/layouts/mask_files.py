"""Reading segmentation mask (and image) files cheaply: the voxels of a few masks and the
values they hold, spatial shapes from file headers only, and whether a mask lies on its image's
grid.

May import: nothing of the project (numpy and the imaging libraries only)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

RASTER = {"png", "jpg", "jpeg", "bmp", "tif", "tiff", "gif"}


def read_mask(path: Path) -> np.ndarray:
    """Mask voxels (for the values of a few masks only)."""
    name = path.name.lower()
    if name.endswith((".nii", ".nii.gz")):
        import nibabel as nib
        return np.asanyarray(nib.load(str(path)).dataobj)
    if name.endswith(".npy"):
        return np.load(path, allow_pickle=False)
    if name.split(".")[-1] in RASTER:
        from PIL import Image
        with Image.open(path) as img:
            return np.asarray(img)
    import SimpleITK as sitk
    return sitk.GetArrayFromImage(sitk.ReadImage(str(path)))


def mask_values(masks: list[Path], count: int = 3) -> list[int]:
    """Nonzero values found in the ``count`` smallest and the ``count`` largest masks (the
    largest hold the most structure: many masks of a slice dataset are empty)."""
    ordered = sorted(masks, key=lambda p: (p.stat().st_size, str(p)))
    chosen = list(dict.fromkeys(ordered[:count] + ordered[-count:]))
    values: set[int] = set()
    for path in chosen:
        try:
            values.update(int(v) for v in np.unique(read_mask(path)) if v > 0)
        except Exception:  # noqa: BLE001 - an unreadable mask is reported at registration
            continue
    return sorted(values)


def header_shape(path: Path) -> tuple[str, tuple[int, ...]] | None:
    """(kind, spatial shape) from the file header only; None when not cheaply readable."""
    name = path.name.lower()
    try:
        if name.endswith((".nii", ".nii.gz")):
            import nibabel as nib
            return "nifti", tuple(int(s) for s in nib.load(str(path)).shape)
        if name.split(".")[-1] in RASTER:
            from PIL import Image
            with Image.open(path) as img:
                return "raster", (img.size[1], img.size[0])
        if name.endswith((".nrrd", ".mha", ".mhd", ".hdr")):
            import SimpleITK as sitk
            reader = sitk.ImageFileReader()
            reader.SetFileName(str(path))
            reader.ReadImageInformation()
            return "nifti", tuple(int(s) for s in reader.GetSize())  # x, y, z like NIfTI
        if name.endswith(".npy"):
            return "npy", tuple(np.load(path, mmap_mode="r", allow_pickle=False).shape)
    except Exception:  # noqa: BLE001 - unreadable headers are reported at registration
        return None
    return None


def spatial_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    shape = tuple(shape)
    while len(shape) > 2 and shape[-1] == 1:
        shape = shape[:-1]
    return shape


def geometry_problem(images: list[Path], mask: Path) -> str:
    """Why the mask cannot go with the image (shapes differ), or ""."""
    got = header_shape(mask)
    if got is None:
        return ""
    kind, mask_shape = got[0], spatial_shape(got[1])
    for number, image in enumerate(images):
        seen = header_shape(image)
        if seen is None or seen[0] != kind:
            continue
        shape = spatial_shape(seen[1])
        if len(shape) == len(mask_shape) + 1:  # a 4D image holding its channels (Decathlon)
            shape = shape[:-1]
        if number and len(shape) == 3 and len(mask_shape) == 3:
            continue   # a further 3D channel on its own grid is resampled onto the first's
        if shape != mask_shape:
            return (f"mask shape {mask_shape} differs from image shape {shape} ({image.name}); "
                    "the mask must be on the image's grid")
    return ""
