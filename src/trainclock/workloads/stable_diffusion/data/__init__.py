"""Stable Diffusion's data: the official formats (webdataset shards, metadata parquet, COCO captions
TSV, FID statistics .npz) and the CPU tiers' captioned images generated from Fashion-MNIST."""
