"""Background jobs: the outbox worker (worker.py) and every job kind with its handler
(handlers.py)."""
