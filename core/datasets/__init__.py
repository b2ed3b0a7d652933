"""Datasets: datacards and their catalogue, registration (scan -> validate -> save), uploads,
thumbnails, the fingerprint, DICOM series, and the leakage-free split and index writing.
layouts/ recognises how a folder is organised.

May import: core.config, core.imaging, core.privacy, core.store.
"""
