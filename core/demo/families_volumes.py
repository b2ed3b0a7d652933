"""Layout families for 3D diagnosis, written the way public sets ship them:

* Labels as file-name tokens (``make_filename_tokens``): one plain container folder
  ``scans/`` of NIfTI T1 brain MRI named ``sub001_AD_T1.nii.gz`` / ``sub002_CN_T1.nii.gz``
  (subject, diagnosis, sequence); every fifth subject also has a one-year follow-up
  ``sub003_AD_T1_m12.nii.gz``. No class folders, no table. Signal: ventricles and sulci widen
  in Alzheimer's disease (the ADNI stand-in's atrophy model).
* TCIA download (``make_tcia_dicom``): the NBIA Data Retriever tree
  ``manifest-<n>/<Collection>/<PatientID>/<MM-DD-YYYY>-NA-<study description>-<n>/
  <series number>.000000-<series description>-<n>/1-NN.dcm`` (one axial chest CT series per
  patient as single-slice DICOM files, stored HU + 1024 with RescaleIntercept -1024; some
  patients also have a one-image scout series), TCIA's ``manifest-<n>/metadata.csv`` (one row
  per series) and the collection's ``clinical_data.csv`` at the root keyed by ``PatientID``
  with ``Diagnosis`` (COVID-19 | Normal). Signal: peripheral ground-glass opacities.

Synthetic, seeded, small; not patient data.

May import: core.demo and third-party libraries."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from core.demo.diagnosis import ct_volume
from core.demo.families_common import group_sizes, unique_ids
from core.demo.m3bench_diagnosis import ADNI_SHAPE, adni_volume
from core.demo.writers import finish, pick, prepare, save_nifti, scaled, write_csv

TOKEN_SPACING = (5.5, 5.5, 5.5)
TOKEN_GROUPS = (1, 1, 2, 1, 1)        # scans per subject, cycled: every fifth has a follow-up


# --------------------------------------------------------------------- file-name tokens
def make_filename_tokens(out_dir: str | Path, seed: int = 0, n: int = 48,
                         scale: float = 1.0) -> Path:
    out = Path(out_dir)
    n = scaled(n, scale, 6)
    spec = {"family": "filename_tokens", "n": n, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    for g, scans in enumerate(group_sizes(n, TOKEN_GROUPS)):
        group = "AD" if g % 2 == 0 else "CN"
        anatomy = {"center": np.array(ADNI_SHAPE) / 2 + rng.normal(0, 0.6, 3),
                   "radii": np.array([13.0, 17.0, 13.0]) * rng.uniform(0.94, 1.04),
                   "ventricle_scale": rng.uniform(0.9, 1.1)}
        atrophy = max(0.8, rng.normal(1.9, 0.14) if group == "AD" else rng.normal(1.0, 0.1))
        for visit in range(scans):
            volume = adni_volume(rng, atrophy + (0.08 * visit if group == "AD" else 0.0),
                                 anatomy)                                  # (z, y, x)
            suffix = "_m12" if visit else ""
            save_nifti(np.round(volume.transpose(2, 1, 0)), TOKEN_SPACING,
                       out / "scans" / f"sub{g + 1:03d}_{group}_T1{suffix}.nii.gz", np.int16)
    return finish(out, spec)


def token_subjects(n: int) -> int:
    return len(group_sizes(n, TOKEN_GROUPS))


# --------------------------------------------------------------------------- TCIA DICOM
COLLECTION = "COVID-CT-CHEST"
MANIFEST = "manifest-1612365584013"
TCIA_DEPTH, TCIA_SIZE, TCIA_THICKNESS, TCIA_PIXEL = 16, 48, 5.0, 7.0
SCOUT_EVERY = 5                       # every fifth patient also has a scout series


def _dicom(path: Path, pixels: np.ndarray, meta: dict, sop: str, number: int,
           position, orientation, spacing, image_type) -> int:
    import pydicom
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.uid import CTImageStorage, ExplicitVRLittleEndian, PYDICOM_IMPLEMENTATION_UID

    file_meta = FileMetaDataset()
    file_meta.MediaStorageSOPClassUID = CTImageStorage
    file_meta.MediaStorageSOPInstanceUID = sop
    file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    file_meta.ImplementationClassUID = PYDICOM_IMPLEMENTATION_UID
    ds = FileDataset(str(path), {}, file_meta=file_meta, preamble=b"\0" * 128)
    ds.SOPClassUID, ds.SOPInstanceUID = CTImageStorage, sop
    ds.ImageType = image_type
    ds.Modality, ds.Manufacturer = "CT", meta["manufacturer"]
    ds.PatientID = ds.PatientName = meta["patient"]
    ds.PatientSex, ds.PatientAge = meta["sex"], f"{meta['age']:03d}Y"
    ds.StudyInstanceUID, ds.SeriesInstanceUID = meta["study_uid"], meta["series_uid"]
    ds.StudyDate, ds.StudyDescription = meta["date"], meta["study_description"]
    ds.SeriesDescription, ds.SeriesNumber = meta["series_description"], meta["series_number"]
    ds.InstanceNumber = number
    ds.ImagePositionPatient = [f"{v:g}" for v in position]
    ds.ImageOrientationPatient = [f"{v:g}" for v in orientation]
    ds.PixelSpacing = [f"{spacing[0]:g}", f"{spacing[1]:g}"]
    ds.SliceThickness = f"{TCIA_THICKNESS:g}"
    ds.Rows, ds.Columns = pixels.shape
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
    ds.RescaleIntercept, ds.RescaleSlope, ds.RescaleType = "-1024", "1", "HU"
    ds.WindowCenter, ds.WindowWidth = "-600", "1500"
    ds.PixelData = np.ascontiguousarray(pixels, dtype="<u2").tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    pydicom.dcmwrite(path, ds, enforce_file_format=True)
    return path.stat().st_size


def tcia_patients(n: int) -> list[str]:
    """Diagnosis per patient: alternating COVID-19 and Normal."""
    return ["COVID-19" if k % 2 == 0 else "Normal" for k in range(n)]


def make_tcia_dicom(out_dir: str | Path, seed: int = 0, n: int = 32,
                    scale: float = 1.0) -> Path:
    from pydicom.uid import generate_uid

    out = Path(out_dir)
    n = scaled(n, scale, 6)
    spec = {"family": "tcia_dicom", "n": n, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    clinical, series_rows = [], []
    numbers = unique_ids(rng, n, 1, 999)
    for k, diagnosis in enumerate(tcia_patients(n)):
        patient = f"CTC-{numbers[k]:04d}"
        month, day = int(rng.integers(3, 13)), int(rng.integers(1, 29))
        meta = {"patient": patient, "sex": pick(rng, ["M", "F"]),
                "age": int(rng.integers(25, 88)), "date": f"2020{month:02d}{day:02d}",
                "manufacturer": pick(rng, ["SIEMENS", "GE MEDICAL SYSTEMS", "TOSHIBA"]),
                "study_uid": generate_uid(entropy_srcs=[str(seed), patient, "study"]),
                "study_description": "CT CHEST WITHOUT CONTRAST"}
        study_dir = (out / MANIFEST / COLLECTION / patient /
                     f"{month:02d}-{day:02d}-2020-NA-{meta['study_description']}-"
                     f"{int(rng.integers(10000, 99999))}")
        series = [(2, "AXIAL 5MM", ["ORIGINAL", "PRIMARY", "AXIAL"])]
        if k % SCOUT_EVERY == 3:
            series.insert(0, (1, "SCOUT", ["ORIGINAL", "PRIMARY", "LOCALIZER"]))
        hu = np.interp(ct_volume(rng, "NCP" if diagnosis == "COVID-19" else "Normal",
                                 TCIA_DEPTH, TCIA_SIZE), [0.0, 0.1, 0.5, 1.0],
                       [-1000.0, -850.0, 40.0, 400.0])                      # (z, y, x)
        stored = np.clip(np.round(hu) + 1024, 0, 4095).astype(np.uint16)
        for number, description, image_type in series:
            uid = generate_uid(entropy_srcs=[str(seed), patient, description])
            folder = study_dir / f"{number}.000000-{description}-{int(rng.integers(10000, 99999))}"
            meta.update(series_uid=uid, series_description=description, series_number=number)
            if description == "SCOUT":          # one coronal projection image
                planes = [np.flipud(stored.mean(axis=1)).repeat(2, axis=0).astype(np.uint16)]
                geometry = [((-168.0, 0.0, 0.0), (1, 0, 0, 0, 0, -1), (2.5, TCIA_PIXEL))]
            else:
                planes = list(stored)
                geometry = [((-168.0, -168.0, -TCIA_THICKNESS * z), (1, 0, 0, 0, 1, 0),
                             (TCIA_PIXEL, TCIA_PIXEL)) for z in range(len(planes))]
            size = 0
            for i, (plane, (position, orientation, spacing)) in enumerate(zip(planes, geometry)):
                sop = generate_uid(entropy_srcs=[uid, str(i)])
                name = f"1-{i + 1:02d}.dcm" if len(planes) > 1 else "1-1.dcm"
                size += _dicom(folder / name, plane, meta, sop, i + 1, position, orientation,
                               spacing, image_type)
            series_rows.append({
                "Series UID": uid, "Collection": COLLECTION, "3rd Party Analysis": "NO",
                "Data Description URI": "", "Subject ID": patient,
                "Study UID": meta["study_uid"], "Study Description": meta["study_description"],
                "Study Date": f"{month:02d}-{day:02d}-2020", "Series Description": description,
                "Manufacturer": meta["manufacturer"], "Modality": "CT",
                "SOP Class Name": "CT Image Storage", "SOP Class UID": "1.2.840.10008.5.1.4.1.1.2",
                "Number of Images": len(planes), "File Size": f"{size / 1e6:.2f} MB",
                "File Location": "./" + folder.relative_to(out / MANIFEST).as_posix(),
                "Download Timestamp": "2021-02-03T15:40:11.021"})
        clinical.append({"PatientID": patient, "Age": meta["age"], "Sex": meta["sex"],
                         "Diagnosis": diagnosis, "CT date": f"2020-{month:02d}-{day:02d}"})
    write_csv(out / MANIFEST / "metadata.csv", list(series_rows[0]), series_rows)
    write_csv(out / "clinical_data.csv", list(clinical[0]), clinical)
    return finish(out, spec)
