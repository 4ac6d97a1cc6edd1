"""The machine a run is on: its devices, their measured matmul peak, the system description."""
