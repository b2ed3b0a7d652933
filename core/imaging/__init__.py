"""Image and volume reading and writing, shared by core and the training templates: the
bottom floor. Every reader returns arrays with their spacing; every index reference (files,
folders of slices, array elements, DICOM series manifests) resolves here.

May import: third-party libraries only (numpy, pydicom, nibabel, SimpleITK, PIL, MONAI).
"""
