"""The rnx-benchmark GitHub Action: inputs, config merging, upload, reports to GitHub, exit code."""
