"""Auto-sync (App mode): every new commit of a linked branch that touches a linked workload,
or what it imports, is benchmarked (docs/auto-sync.md)."""
