"""DLRM-DCNv2 data: the Criteo multi-hot day files (read and written) and the tiers' click model."""
