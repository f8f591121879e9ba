"""rnx-benchmark: a performance regression gate for GPU and ML kernels."""

__version__ = "0.1.0"
