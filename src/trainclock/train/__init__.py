"""The generic training loop: optimizer and schedule, precision, eval cadence, timing, logging."""
