"""Dataset fingerprint (nnU-Net's idea): a few numbers read from image headers that drive the
plan — typical size, channels, dimension. Reads headers only; never loads a whole dataset."""
from __future__ import annotations

import statistics
from pathlib import Path


def _shape_of(path: Path | list) -> tuple[list[int], int] | None:
    if isinstance(path, list):  # channel files: one image with len(path) channels
        first = _shape_of(Path(path[0]))
        return (first[0], len(path)) if first else None
    name = path.name.lower()
    try:
        if path.is_dir():
            slices = sorted(p for p in path.iterdir() if p.is_file())
            first = _shape_of(slices[0]) if slices else None
            return ([len(slices), *first[0]], first[1]) if first else None
        if name.endswith((".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")):
            from PIL import Image
            with Image.open(path) as img:
                channels = len(img.getbands())
                return [img.height, img.width], 1 if channels in (1, 2) else 3
        if name.endswith((".dcm", ".dicom")):
            import pydicom
            ds = pydicom.dcmread(path, stop_before_pixels=True)
            return [int(ds.Rows), int(ds.Columns)], int(getattr(ds, "SamplesPerPixel", 1))
        if name.endswith((".nii", ".nii.gz")):
            import nibabel
            shape = list(nibabel.load(path).shape)
            return shape[:3], shape[3] if len(shape) > 3 else 1
        if name.endswith((".nrrd", ".mha", ".mhd")):
            import SimpleITK as sitk
            reader = sitk.ImageFileReader()
            reader.SetFileName(str(path))
            reader.ReadImageInformation()
            return list(reversed(reader.GetSize())), reader.GetNumberOfComponents()
    except Exception:
        return None
    return None


def _spacing_of(path) -> list[float] | None:
    path = Path(path[0] if isinstance(path, list) else path)
    if not path.name.lower().endswith((".nii", ".nii.gz")):
        return None
    try:
        import nibabel
        return [float(z) for z in nibabel.load(path).header.get_zooms()[:3]]
    except Exception:
        return None


def fingerprint(image_paths: list, max_probe: int = 50) -> dict:
    """Shapes (header order), channels and, for NIfTI, voxel spacing in mm (x, y, z)."""
    step = max(1, len(image_paths) // max_probe)
    chosen = image_paths[::step][:max_probe]
    probes = [p for p in (_shape_of(x if isinstance(x, list) else Path(x)) for x in chosen) if p]
    spacings = [s for s in (_spacing_of(x) for x in chosen[:20]) if s]
    if not probes:
        return {"probed": 0}
    ndim = statistics.mode(len(s) for s, _ in probes)
    shapes = [s for s, _ in probes if len(s) == ndim]
    median = [int(statistics.median(axis)) for axis in zip(*shapes)]
    return {"probed": len(probes), "spatial_dims": ndim, "median_shape": median,
            "min_shape": [min(a) for a in zip(*shapes)], "max_shape": [max(a) for a in zip(*shapes)],
            "channels": statistics.mode(c for _, c in probes),
            "median_spacing": [round(statistics.median(a), 3) for a in zip(*spacings)]
            if spacings else None}


def training_image_size(fp: dict, device: str) -> list[int]:
    """Median size, capped (CPU 128 px in 2D / 64 voxels in 3D; GPU 224 / 128), multiple of 16."""
    median = fp.get("median_shape") or [128, 128]
    cap = (224 if len(median) == 2 else 128) if device == "cuda" else (128 if len(median) == 2 else 64)
    return [max(32, min(cap, int(round(m / 16)) * 16 or 16)) for m in median]


CT_WINDOWS = {"chest": [-1000, 400], "brain": [0, 80], "head": [0, 80], "spine": [-250, 1250]}
RAW_FORMATS = {"nifti", "dicom", "nrrd", "mha", "npy", "npz", "pt"}


def intensity_for(modality: str, anatomy: str, file_format: str) -> dict:
    """How to normalise intensities: CT in Hounsfield units gets a window chosen by anatomy
    (lung, brain, bone, else soft tissue); MRI a z-score over the body; 8-bit images and
    anything unknown a min-max scaling."""
    raw = file_format.lower() in RAW_FORMATS
    if modality == "CT" and raw:
        return {"kind": "ct", "window": CT_WINDOWS.get(anatomy.lower(), [-160, 240])}
    if modality == "MRI" and raw:
        return {"kind": "mri"}
    return {"kind": "minmax"}
