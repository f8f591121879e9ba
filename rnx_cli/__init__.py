"""The `rnx` command: the dispatcher and the commands that belong to no one package."""
