"""`rnx schema`: print the JSON Schema of results documents for other tools."""

from __future__ import annotations

import argparse
import json

from rnx.schema import SCHEMA_VERSION, json_schema


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="rnx schema", description=__doc__)
    parser.parse_args(argv)
    schema = json_schema()
    schema["$id"] = f"https://rnx-benchmark.dev/schema/results-v{SCHEMA_VERSION}.json"
    print(json.dumps(schema, indent=2))
    return 0
