"""Dataset fingerprint (nnU-Net's idea): a few numbers read from image headers that drive the
plan — typical size, channels, dimension. Reads headers only; never loads a whole dataset."""
from __future__ import annotations

import statistics
from pathlib import Path
from core.imaging.arrays import array_layout
from core.imaging.image_io import read_image
from core.imaging.refs import (ARRAY_SUFFIXES, ELEMENT_RE, MANIFEST_SUFFIX, PICKLE_SUFFIXES,
                               is_dicom_file, ref_files, ref_items, suffix_of)


def _npz_member_shape(path: Path, key: str) -> list[int] | None:
    """Shape of one array in an .npz from its .npy header (nothing decompressed)."""
    import zipfile

    import numpy as np
    with zipfile.ZipFile(path) as archive:
        names = [n for n in archive.namelist() if n.endswith(".npy")]
        name = f"{key}.npy" if key else (names[0] if len(names) == 1 else None)
        if name not in names:
            return None
        with archive.open(name) as handle:
            version = np.lib.format.read_magic(handle)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                np.lib.format.read_array_header_2_0
            return list(read(handle)[0])


def _array_shape(ref: str, allow_pickle: bool) -> tuple[list[int], int] | None:
    """(spatial shape, channels) of an array file or of an element ``file::key[i]`` (the
    layout rule of core.imaging.arrays.array_layout); .npy/.npz from headers, .pt and allowed
    pickles loaded."""
    import numpy as np

    match = ELEMENT_RE.match(ref)
    path = Path(match.group("file") if match else ref)
    key = match.group("key").strip() if match else ""
    index = match.group("index") if match else None
    suffix = suffix_of(path)
    if suffix in PICKLE_SUFFIXES and not allow_pickle:
        return None  # unpickling runs code: only for datasets registered as allowing it
    if suffix not in (".npz", ".npy"):  # .pt (weights_only) or an allowed pickle
        shape = read_image(ref, allow_pickle=allow_pickle)[0].shape  # (C, *spatial)
        return list(shape[1:]), int(shape[0])
    shape = _npz_member_shape(path, key) if suffix == ".npz" else \
        list(np.load(path, mmap_mode="r", allow_pickle=False).shape)
    if shape is None:
        return None
    return array_layout(shape[1:] if index is not None else shape, ref)


def _dicom_header(path: Path):
    import pydicom
    return pydicom.dcmread(path, stop_before_pixels=True,
                           specific_tags=["Rows", "Columns", "SamplesPerPixel", "NumberOfFrames"])


def _dicom_shape(ds) -> tuple[list[int], int]:
    frames = int(getattr(ds, "NumberOfFrames", 1) or 1)
    plane = [int(ds.Rows), int(ds.Columns)]
    return ([frames] if frames > 1 else []) + plane, int(getattr(ds, "SamplesPerPixel", 1) or 1)


def _shape_of(path: Path | list | str, allow_pickle: bool = False) -> tuple[list[int], int] | None:
    """(shape, channels) from headers: 2D (H, W); stacks of slices, series manifests and
    multi-frame DICOM (slices, H, W); arrays in their stored order minus the channel axis."""
    try:
        items = ref_items(path)
        if len(items) > 1:  # channel files: one image with len(items) channels
            first = _shape_of(items[0], allow_pickle)
            return (first[0], len(items)) if first else None
        ref = items[0]
        path = Path(ref)
        name = path.name.lower()
        if ELEMENT_RE.match(ref) or suffix_of(path) in ARRAY_SUFFIXES:
            return _array_shape(ref, allow_pickle)
        if name.endswith(MANIFEST_SUFFIX) or path.is_dir():  # a series / a stack of slices
            slices = ref_files(ref)
            first = _shape_of(slices[0])
            return ([len(slices), *first[0][-2:]], first[1]) if first else None
        if name.endswith((".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")):
            from PIL import Image
            with Image.open(path) as img:
                channels = len(img.getbands())
                return [img.height, img.width], 1 if channels in (1, 2) else 3
        if name.endswith((".nii", ".nii.gz")):
            import nibabel
            shape = list(nibabel.load(path).shape)
            return shape[:3], shape[3] if len(shape) > 3 else 1
        if name.endswith((".nrrd", ".nhdr", ".mha", ".mhd", ".hdr")):
            import SimpleITK as sitk
            reader = sitk.ImageFileReader()
            reader.SetFileName(str(path))
            reader.ReadImageInformation()
            return list(reversed(reader.GetSize())), reader.GetNumberOfComponents()
        if is_dicom_file(path):
            return _dicom_shape(_dicom_header(path))
    except Exception:
        return None
    return None


def _spacing_of(path) -> list[float] | None:
    try:
        path = Path(ref_items(path)[0])
        if not path.name.lower().endswith((".nii", ".nii.gz")):
            return None
        import nibabel
        return [float(z) for z in nibabel.load(path).header.get_zooms()[:3]]
    except Exception:
        return None


def fingerprint(image_paths: list, max_probe: int = 50, allow_pickle: bool = False) -> dict:
    """Shapes (header order), channels and, for NIfTI, voxel spacing in mm (x, y, z). Pickled
    images are probed only with ``allow_pickle`` (unpickling runs code), else skipped."""
    step = max(1, len(image_paths) // max_probe)
    chosen = image_paths[::step][:max_probe]
    probes = [p for p in (_shape_of(x, allow_pickle) for x in chosen) if p]
    spacings = [s for s in (_spacing_of(x) for x in chosen[:20]) if s]
    if not probes:
        return {"probed": 0}
    ndim = statistics.mode(len(s) for s, _ in probes)
    shapes = [s for s, _ in probes if len(s) == ndim]
    median = [int(statistics.median(axis)) for axis in zip(*shapes)]
    return {"probed": len(probes), "spatial_dims": ndim, "median_shape": median,
            "min_shape": [min(a) for a in zip(*shapes)],
            "max_shape": [max(a) for a in zip(*shapes)],
            "channels": statistics.mode(c for _, c in probes),
            "median_spacing": [round(statistics.median(a), 3) for a in zip(*spacings)]
            if spacings else None}


def training_image_size(fp: dict, device: str) -> list[int]:
    """Median size, capped (CPU 128 px in 2D / 64 voxels in 3D; GPU 224 / 128), multiple of 16."""
    median = fp.get("median_shape") or [128, 128]
    cap = ((224 if len(median) == 2 else 128) if device == "cuda"
           else (128 if len(median) == 2 else 64))
    return [max(32, min(cap, int(round(m / 16)) * 16 or 16)) for m in median]


CT_WINDOWS = {"chest": [-1000, 400], "brain": [0, 80], "head": [0, 80], "spine": [-250, 1250]}
RAW_FORMATS = {"nifti", "dicom", "nrrd", "mha", "npy", "npz", "pt", "h5", "hdf5"}


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
