"""A workload that fails at import."""

import torch  # noqa: F401

raise RuntimeError("this workload is broken on purpose")
