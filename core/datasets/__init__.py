"""Datasets: datacards and their catalogue, registration (drafting: scan -> draft card;
registration: validate -> save), validation (with image_geometry), uploads, thumbnails, the
fingerprint, DICOM series, the words of requests and descriptions (vocabulary), and the
leakage-free split (splitting, split_caps) and index writing (indexing). layouts/ recognises how
a folder is organised.

May import: core.config, core.imaging, core.privacy, core.store.
"""
