"""Tests of the cluster launchers (Slurm, Kubernetes) and the scaling sweep."""
