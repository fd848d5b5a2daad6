"""The disk, the floor every stage stands on: folders opened by descriptor from a trusted anchor down
and never through a link (`tree`), bounded reads and moves of single entries (`entries`), session ids
as folder names (`paths`), and the `DiskWriter` seam that stages, syncs and places a response without
ever replacing one (`writer`, over anonymous files, `anonymous`)."""
