"""Alerts: events (a BLOCK that landed, a change point, an accepted slowdown, a failing channel)
sent to a workspace's channels (Slack, Teams, email, a signed webhook) through the outbox.

    events.py     the events and their facts, written to the outbox with what caused them
    message.py    one event's message: what, where, how much, links
    slack.py, teams.py, email.py, webhook.py   each channel's format
    channels.py   what each kind of channel needs, and sending to one
    manage.py     adding, listing and removing channels and rules (`rnx notify`)
"""
