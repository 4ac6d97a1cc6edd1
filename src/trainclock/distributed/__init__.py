"""Distributed training: process groups, parallelism wrappers and launchers (torchrun, Slurm, Kubernetes)."""
