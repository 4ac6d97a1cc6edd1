"""3D U-Net data: KiTS19 NIfTI and its preprocessing, the preprocessed .npy pairs the training
reads, the CPU tiers' generated volumes, and the patches each step trains on."""
