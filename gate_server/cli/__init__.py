"""The command line: `rnx serve|token|branch|notify|...` and `python -m gate_server COMMAND`
(main.py); alert channels (alerts.py)."""
