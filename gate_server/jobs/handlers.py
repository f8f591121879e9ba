"""Every kind of outbox job and its handler, in one place (gate_server/jobs/worker.py runs them).

Enqueue a job with gate_server.db.outbox.enqueue(conn, KIND, payload) inside the transaction
that causes it; a kind missing here is never claimed and stays pending.
"""

from __future__ import annotations

from gate_server.domain import change_points
from gate_server.domain.alerts.delivery import DELIVER
from gate_server.domain.alerts.delivery import HANDLERS as ALERT_HANDLERS
from gate_server.domain.autosync import jobs as autosync
from gate_server.domain.bisection import jobs as bisection
from gate_server.jobs.worker import Handler

HANDLERS: dict[str, Handler] = {
    change_points.DETECT_KIND: change_points.handle_detect,
    # bisection of change points in App mode (gate_server/domain/bisection/jobs.py)
    bisection.START_KIND: bisection.handle_start,
    bisection.ADVANCE_KIND: bisection.handle_advance,
    bisection.MEASURED_KIND: bisection.handle_measured,
    bisection.CULPRIT_KIND: bisection.handle_culprit,
    # auto-sync of linked workloads in App mode (gate_server/domain/autosync/jobs.py)
    autosync.PUSH_KIND: autosync.handle_push,
    autosync.DISPATCH_KIND: autosync.handle_dispatch,
    # alerts (gate_server/domain/alerts/delivery.py): event.* fan out, alert.deliver sends
    **ALERT_HANDLERS,
}

# The outbox worker's loops (gate_server/jobs/worker.py), run side by side: one for everything but
# sends, and DELIVERY_LANES for sends, so that a receiver that never answers holds up at most
# one of them (gate_server/domain/alerts/traffic.py keeps one send per channel in flight).
DELIVERY_LANES = 4
LANES: list[set[str]] = [set(HANDLERS) - {DELIVER}] + [{DELIVER}] * DELIVERY_LANES
