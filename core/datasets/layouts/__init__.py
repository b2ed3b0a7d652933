"""Layout recognisers: how a dataset folder holds its images and labels.

types (Sample, ScanResult, ScanError, suffix tables, the shared folder walk) is at the bottom;
tables reads any label table, label_table_ids says which file a table cell names and
array_headers reads array shapes; known_formats reads the format files (core/datasets/formats);
one family of modules per layout above them (arrays; filenames; dicom; masks with mask_pairing,
mask_labels and mask_files, and mask_structures for one binary mask file per structure; boxes
with box_encodings and box_world; reports; common holds what the list layouts share; lists
tries reports, boxes and masks); dispatch tries them in order. Label tables, per-image JSON
fields and file-name labels are read by the records engine (core.datasets.records), which
interpret asks beside the readers.

May import: core.config, core.imaging, core.privacy, and modules below it in this order.
"""
