"""Privacy: which table columns and DICOM tags identify a patient (redaction), and the
pseudonyms that replace patient IDs.

May import: the standard library only.
"""
