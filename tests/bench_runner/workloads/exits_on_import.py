"""A workload whose import kills its process (as a segfaulting extension would)."""

import os

os._exit(5)
