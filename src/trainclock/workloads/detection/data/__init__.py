"""Detection data: the official COCO and OpenImages-MLPerf layouts, and the CPU tiers' mosaics."""
