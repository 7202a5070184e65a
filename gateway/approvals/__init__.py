"""Approvals: a dangerous command waits in its worker thread until a person answers in the chat.

``hook`` is the thread side (the terminal tool asks and waits), ``broker`` the loop side (prompt, decision,
grants), ``store`` the database rows, ``commands`` the typed ``/approve``/``/deny``, ``text`` what people read,
``remote`` the same across instances. A feature over inbound (access rules), outbound and commands; the runner
wires it, and nothing below imports it.
"""
