"""Layout recognisers: how a dataset folder holds its images and labels.

types (Sample, ScanResult, ScanError, suffix tables, the shared folder walk) is at the bottom;
tables reads any label table and array_headers reads array shapes; one family of modules per
layout above them (label_table with label_table_ids and label_table_columns; arrays; filenames;
dicom; masks with mask_pairing, mask_labels and mask_files, and mask_structures for one binary
mask file per structure; boxes; reports; common holds what the list layouts share; lists tries
reports, boxes and masks); dispatch tries them in order.

May import: core.config, core.imaging, core.privacy, and modules below it in this order.
"""
