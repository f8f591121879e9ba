"""`python -m rnx_cli ...` is `rnx ...`."""

from __future__ import annotations

import sys

from rnx_cli.main import main

sys.exit(main())
