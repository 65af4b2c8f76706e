"""gpuarena: trustworthy verdicts and honest timing for GPU kernels."""

__version__ = "0.1.0"

HARNESS_VERSION = f"gpuarena-harness/{__version__}"
"""Names the one harness that produced a record: every Evaluation carries it."""
