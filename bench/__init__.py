"""mcutorch benchmarks: `python -m bench` prints tables (figures are measured, never asserted)."""
