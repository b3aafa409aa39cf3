"""The web dashboard of a job (`kstream ui`, `kstream run --ui-port`).

`kstream.tools.ui.server` tails the job's control topic on a thread and serves
the page (``static/``, shipped in the wheel) and its one JSON document,
`kstream.protocol.dashboard.dashboard_view`'s.
"""
