"""Layout recognisers: how a dataset folder holds its images and labels.

types (Sample, ScanResult, ScanError, suffix tables) is at the bottom; tables reads any label
table; one module per layout family above them (label_table, arrays, filenames, dicom, masks,
boxes, reports; common holds what the list layouts share); dispatch tries them in order.

May import: core.config, core.imaging, core.privacy, and modules below it in this order.
"""
