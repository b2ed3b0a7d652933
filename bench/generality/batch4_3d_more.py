"""Batch 4, NIfTI volume generators: MosMedData COVID19_1110 and LiTS (see ``batch4.py`` for
the documentation each follows). Tiny CT volumes in the real layouts, the label drawn into the
voxels. Written from the datasets' public documentation only; no code of the app is
imported."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .batch4_common import save_nii, save_xlsx
from .common import ball, ellipse, mkdir, rng_for

# ============================================================================ MosMedData

MOSMED_CATEGORIES = ["CT-0", "CT-1", "CT-2", "CT-3", "CT-4"]
# study numbers are contiguous per category in the release (CT-0 1-254, CT-1 255-938, ...)
_MOSMED_RANGES = {"CT-0": (1, 254, 12), "CT-1": (255, 938, 14), "CT-2": (939, 1063, 10),
                  "CT-3": (1064, 1108, 8), "CT-4": (1109, 1110, 2)}
_MOSMED_EXTENT = {"CT-0": (0, 0), "CT-1": (0.06, 0.2), "CT-2": (0.3, 0.45),
                  "CT-3": (0.55, 0.7), "CT-4": (0.8, 0.92)}


def _mosmed_chest(rng, cat, shape=(32, 32, 10)):
    """(x, y, z) chest CT in HU and its lesion mask: peripheral ground glass (consolidation
    when CT-3/CT-4) filling the share of lung volume the category stands for (<25%, 25-50%,
    50-75%, >75%)."""
    v = np.full(shape, -1000.0)
    c = (shape[0] / 2, shape[1] / 2, shape[2] / 2)
    body = ball(shape, c, (14, 12, 30))
    v[body] = 40
    lungs = ball(shape, (9.5, 15, c[2]), (6, 8.5, 5.5)) | ball(shape, (22.5, 15, c[2]),
                                                              (6, 8.5, 5.5))
    v[lungs] = -860
    v[ball(shape, (16, 24.5, c[2]), (1.5, 1.5, 30))] = 600  # spine
    lesion = np.zeros(shape, bool)
    lo, hi = _MOSMED_EXTENT[cat]
    target = rng.uniform(lo, hi) if hi else 0.0
    n_lung = lungs.sum()
    cand = np.argwhere(lungs)
    while lesion.sum() < target * n_lung:
        p = cand[rng.integers(len(cand))]
        lesion |= ball(shape, p, (rng.uniform(2, 3.5), rng.uniform(2, 3.5), 2)) & lungs
    v[lesion] = -150 if cat in ("CT-3", "CT-4") else -560
    v += rng.normal(0, 15, shape)
    return np.clip(v, -1024, 3071).round().astype(np.int16), lesion


def make_mosmeddata(out_dir: Path, seed: int = 0) -> Path:
    """MosMedData: Chest CT Scans with COVID-19 Related Findings (Morozov et al., arXiv:
    2005.06465 / medRxiv 2020.05.20.20100362; mosmed.ai/en/datasets/covid191110): COVID19_1110/
    studies/CT-{0,1,2,3,4}/study_NNNN.nii.gz (severity category = folder: CT-0 no signs of
    viral pneumonia, CT-1 <25% of lung parenchyma involved, CT-2 25-50%, CT-3 50-75%, CT-4
    >75%; study numbers run in blocks per category and CT-4 holds only 2 studies),
    masks/study_NNNN_mask.nii.gz (ground-glass and consolidation masks for 50 CT-1 studies,
    study_0255-0304), dataset_registry.xlsx (sheet 'MosMedData COVID19_1110': study_id,
    category, study_file, mask_file), README_EN.md / README_RU.md and LICENSE (CC BY-NC-ND
    3.0). Simplifications: 32x32x10 volumes (the public ones are 512x512 by about 40
    slices), 46 studies (masks for the sampled ones among 0255-0304); the exact registry column
    contents are approximated."""
    rng = rng_for(seed, "mosmeddata")
    root = mkdir(Path(out_dir) / "COVID19_1110")
    reg = [["study_id", "category", "study_file", "mask_file"]]
    aff = np.diag([-11.0, -11.0, 8.0, 1.0])
    aff[:3, 3] = [176.0, 176.0, -40.0]
    for cat in MOSMED_CATEGORIES:
        a, b, n = _MOSMED_RANGES[cat]
        nums = sorted(int(x) for x in rng.choice(np.arange(a + 6, b + 1), n, replace=False)) \
            if cat == "CT-1" else sorted(int(x) for x in rng.choice(np.arange(a, b + 1), n,
                                                                    replace=False))
        if cat == "CT-1":
            nums = list(range(255, 261)) + nums[: n - 6]
        for num in nums:
            stem = f"study_{num:04d}"
            vol, lesion = _mosmed_chest(rng, cat)
            rel = f"studies/{cat}/{stem}.nii.gz"
            save_nii(root / rel, vol, aff)
            mask_rel = ""
            if 255 <= num <= 304:
                mask_rel = f"masks/{stem}_mask.nii.gz"
                save_nii(root / mask_rel, lesion.astype(np.uint8), aff)
            reg.append([stem, cat, rel, mask_rel or None])
    save_xlsx(root / "dataset_registry.xlsx", "MosMedData COVID19_1110", reg)
    (root / "README_EN.md").write_text(
        "# MosMedData: Chest CT Scans with COVID-19 Related Findings\n\nThis dataset contains "
        "anonymised human lung computed tomography (CT) scans with COVID-19 related findings, "
        "as well as without such findings. A small subset of studies has been annotated with "
        "binary pixel masks depicting regions of interests (ground-glass opacifications and "
        "consolidations). CT scans were obtained between 1st of March, 2020 and 25th of April, "
        "2020, and provided by municipal hospitals in Moscow, Russia.\n\n## Structure\n\n"
        "- studies/CT-0 ... studies/CT-4: one NIfTI file per study, grouped by category\n"
        "  - CT-0: normal lung tissue, no CT signs of viral pneumonia\n"
        "  - CT-1: several ground-glass opacifications, involvement of lung parenchyma <= 25%\n"
        "  - CT-2: involvement of lung parenchyma 25-50%\n"
        "  - CT-3: involvement of lung parenchyma 50-75%\n"
        "  - CT-4: diffuse involvement with consolidation, >= 75%\n"
        "- masks/: binary masks for 50 studies of category CT-1\n"
        "- dataset_registry.xlsx: list of studies, categories and files\n\nLicense: CC BY-NC-ND "
        "3.0.\n")
    (root / "README_RU.md").write_text(
        "# MosMedData: набор данных КТ органов грудной клетки с признаками COVID-19\n\n"
        "Категории КТ-0 ... КТ-4 по доле поражения паренхимы легких; маски для 50 исследований "
        "категории КТ-1.\n")
    (root / "LICENSE").write_text(
        "Creative Commons Attribution-NonCommercial-NoDerivs 3.0 Unported (CC BY-NC-ND 3.0)\n"
        "Copyright (c) 2020 Research and Practical Clinical Center for Diagnostics and "
        "Telemedicine Technologies of the Moscow Health Care Department.\n")
    return root


# ============================================================================ LiTS


def _lits_volume(rng, nz, n_tum):
    """(x, y, z) contrast-enhanced abdominal CT in HU and labels (1 liver, 2 tumour): body,
    liver on the patient's right (image left), spleen, spine, aorta, kidneys in the lower
    slices; tumours are hypodense balls inside the liver."""
    shape = (32, 32, nz)
    v = np.full(shape, -1000.0)
    lab = np.zeros(shape, np.uint8)
    for z in range(nz):
        t = z / max(nz - 1, 1)
        sl = np.where(ellipse((32, 32), 16, 16, 12, 15), 40.0, -1000.0)  # (x, y)
        sl[ellipse((32, 32), 16, 16, 12, 15) & ~ellipse((32, 32), 16, 16, 10.5, 13.5)] = -100
        sl[ellipse((32, 32), 16, 24, 1.8, 1.8)] = 700
        sl[ellipse((32, 32), 17.5, 20, 1.2, 1.2)] = 180
        if t > 0.55:
            for kx in (10.5, 21.5):
                sl[ellipse((32, 32), kx, 21, 2.2, 1.8)] = 150
        liver = ellipse((32, 32), 11, 14, 6.5 * (1.15 - t), 7.5 * (1.1 - t * 0.5)) \
            if t < 0.85 else np.zeros((32, 32), bool)
        sl[liver] = 105
        if t < 0.5:
            sl[ellipse((32, 32), 23, 15, 3, 2.5)] = 110
        v[:, :, z] = sl
        lab[:, :, z][liver] = 1
    cand = np.argwhere(lab == 1)
    for _ in range(n_tum if len(cand) else 0):
        p = cand[rng.integers(len(cand))]
        t = ball(shape, p, (rng.uniform(1.5, 3.2),) * 2 + (rng.uniform(1.2, 2.0),)) & (lab == 1)
        lab[t] = 2
        v[t] = rng.uniform(30, 55)
    v += rng.normal(0, 12, shape)
    return np.clip(v, -1024, 3071).round().astype(np.int16), lab


def make_lits(out_dir: Path, seed: int = 0) -> Path:
    """LiTS, Liver Tumor Segmentation Challenge (Bilic et al., Med Image Anal 84:102680, 2023,
    arXiv:1901.04056; CodaLab competition 17094): 'Training Batch 1/' and 'Training Batch 2/'
    each holding volume-<N>.nii and segmentation-<N>.nii side by side (uncompressed NIfTI,
    paired only by the number after a different prefix; N 0-27 in batch 1 and 28-130 in
    batch 2), labels 0 background, 1 liver, 2 tumour; the volumes come from several sites and
    differ in orientation (axis flips in the affine), slice count and spacing; a few have no
    tumour. Simplifications: 32x32 by 12-24 slices (the originals are 512x512 by 75-987), 40
    volumes (0-9 in batch 1, 10-39 in batch 2), the unlabelled test volumes (test-volume-<N>.nii,
    a separate download) left out."""
    rng = rng_for(seed, "lits")
    root = mkdir(Path(out_dir) / "LiTS")
    for n in range(40):
        folder = root / ("Training Batch 1" if n < 10 else "Training Batch 2")
        nz = int(rng.integers(12, 25))
        n_tum = 0 if rng.random() < 0.12 else int(rng.integers(1, 4))
        vol, lab = _lits_volume(rng, nz, n_tum)
        sx, sz = rng.uniform(10.5, 13.0), float(rng.choice([5.0, 6.0, 8.0]))
        flip = rng.random() < 0.3
        aff = np.diag([sx if flip else -sx, sx if flip else -sx, sz, 1.0])
        aff[:3, 3] = [-170.0 if flip else 170.0, -170.0 if flip else 170.0,
                      float(-sz * nz)]
        if flip:  # stored the other way round, as some sites' volumes are
            vol, lab = vol[::-1, ::-1].copy(), lab[::-1, ::-1].copy()
        save_nii(folder / f"volume-{n}.nii", vol, aff)
        save_nii(folder / f"segmentation-{n}.nii", lab, aff)
    return root
