"""Tests of rnx_cli: commands that belong to no package (rnx check, rnx mcp)."""
