"""Checking a compiled model: the dataset file convention and `validate` (accuracy against labels
and against the float and fake-quant models)."""
from mcutorch.check.dataset import Dataset, load_dataset
from mcutorch.check.validate import validate

__all__ = ["Dataset", "load_dataset", "validate"]
