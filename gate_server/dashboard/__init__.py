"""The dashboard's pages: what each shows (reads.py), how (views.py, charts.py, templates/),
for signed-in viewers. Its routes are gate_server/http/dashboard/; create_app mounts them.
"""
