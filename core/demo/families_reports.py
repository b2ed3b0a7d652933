"""Layout family for report generation: one folder per study holding the image and the report
as a plain-text file beside it (MIMIC-CXR-like free text), ``studies/<study id>/image.png`` +
``studies/<study id>/report.txt``. The report is the radiologist's full note: a ``FINAL
REPORT`` banner, ``EXAMINATION``, ``INDICATION`` (age de-identified as ``___``),
``COMPARISON``, then ``FINDINGS:`` and ``IMPRESSION:`` sections, wrapped at 76 columns. The
findings and impression state what the image shows (lung opacity by side and size,
cardiomegaly, pleural effusions; each sentence in one of two wordings), so an image-conditioned
model beats a constant report on ROUGE.

Synthetic, seeded, small; not patient data.

May import: core.demo and third-party libraries."""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np

from core.demo.families_common import unique_ids
from core.demo.reports import chest_image, chest_report
from core.demo.writers import finish, pick, prepare, save_png, scaled

INDICATIONS = ["___-year-old woman with cough, evaluate for pneumonia.",
               "___-year-old man with shortness of breath.", "Chest pain, rule out effusion.",
               "___F with fever and leukocytosis.", "Pre-operative assessment."]


def _section(title: str, text: str) -> str:
    body = textwrap.fill(text, width=76, initial_indent=" ", subsequent_indent=" ")
    return f" {title}:\n \n{body}\n"


def report_text(rng: np.random.Generator, findings: str, impression: str) -> str:
    head = (f"{'FINAL REPORT':>45}\n"
            f" EXAMINATION:  {pick(rng, ['CHEST (PA AND LAT)', 'CHEST (PORTABLE AP)'])}\n \n"
            f" INDICATION:  {pick(rng, INDICATIONS)}\n \n"
            f" COMPARISON:  {pick(rng, ['None.', '___.', 'Prior radiograph from ___.'])}\n \n")
    return head + _section("FINDINGS", findings) + " \n" + _section("IMPRESSION", impression)


def make_study_reports(out_dir: str | Path, seed: int = 0, n: int = 100,
                       scale: float = 1.0) -> Path:
    out = Path(out_dir)
    n = scaled(n, scale, 8)
    spec = {"family": "study_reports", "n": n, "seed": seed, "v": 1}
    if prepare(out, spec):
        return out
    rng = np.random.default_rng(seed)
    for study in unique_ids(rng, n, 50000000, 59999999):
        opacity = ((pick(rng, ["small", "large"]), pick(rng, ["right", "left"]))
                   if rng.random() < 0.55 else None)
        cardiomegaly, effusion = bool(rng.random() < 0.35), bool(rng.random() < 0.3)
        findings, impression = chest_report(rng, opacity, cardiomegaly, effusion)
        folder = out / "studies" / f"s{study}"
        save_png(chest_image(rng, opacity, cardiomegaly, effusion, 64), folder / "image.png")
        (folder / "report.txt").write_text(report_text(rng, findings, impression))
    return finish(out, spec)


def read_report(path: Path) -> dict[str, str]:
    """The FINDINGS and IMPRESSION sections of one report, unwrapped."""
    text = path.read_text()
    out = {}
    for key, nxt in (("FINDINGS", "IMPRESSION"), ("IMPRESSION", None)):
        end = rf"(?=\n\s*{nxt}:)" if nxt else r"\Z"
        match = re.search(rf"{key}:\s*(.*?){end}", text, re.DOTALL)
        out[key.lower()] = " ".join(match.group(1).split()) if match else ""
    return out
