"""One-off: TCPD's univariate series and annotations into benchmarks/data/tcpd/tcpd_univariate.json.

Reads a checkout of github.com/alan-turing-institute/TCPD (its bundled `datasets/*/*.json` and
`annotations.json`; the series it only builds by download are not there) and writes, per
series, its values (null for a missing one) and each annotator's change points.

    python experiments/tcpd_extract.py /path/to/TCPD <commit>
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "tcpd" / "tcpd_univariate.json"


def main() -> None:
    root, commit = Path(sys.argv[1]), sys.argv[2]
    annotations = json.loads((root / "annotations.json").read_text())
    series = {}
    for path in sorted(root.glob("datasets/*/*.json")):
        data = json.loads(path.read_text())
        if data.get("n_dim") != 1 or data["name"] not in annotations:
            continue
        raw = data["series"][0]["raw"]
        series[data["name"]] = {
            "values": [None if v is None else float(v) for v in raw],
            "annotations": annotations[data["name"]],
        }
    missing = sorted(set(annotations) - set(series))
    out = {
        "source": (
            f"github.com/alan-turing-institute/TCPD at {commit}: datasets/<name>/<name>.json "
            "(series[0].raw) and annotations.json (annotator id -> change point indices). "
            "van den Burg and Williams 2020, An Evaluation of Change Point Detection Algorithms, "
            "arXiv:2003.06222. Licences: see README.md next to this file."
        ),
        "not_included": {
            "built by download only (not in the repository)": [
                m for m in missing if m not in ("run_log", "apple", "bee_waggle_6", "occupancy")
            ],
            "multivariate": ["apple", "bee_waggle_6", "occupancy", "run_log"],
        },
        "series": series,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, separators=(",", ":")) + "\n")
    print(f"{len(series)} series -> {OUT} ({OUT.stat().st_size} bytes); missing {missing}")


if __name__ == "__main__":
    main()
