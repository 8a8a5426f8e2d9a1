"""Backends: per-target kernel choice (Cortex-M) and NPU lowering."""
