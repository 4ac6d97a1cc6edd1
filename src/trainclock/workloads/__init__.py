"""Benchmarks trainclock can run. Each subpackage holds a spec, a model and its data."""
