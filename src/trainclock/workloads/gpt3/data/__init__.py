"""GPT-3 data: text sources, tokenization into memory-mapped token files, deterministic batches."""
