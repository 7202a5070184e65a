"""The agent in the conversation, beyond answering the message in front of it: it asks the person a question
and waits for the answer (``asking`` the thread side, ``clarify`` the loop side: prompt, answers by button or
typed text, restart), and it sends messages to other chats (``outgoing``: targets, approval, the exactly-once
queue that ``herald send`` shares). A feature over inbound (access rules), outbound, approvals and cron's
targets; the runner wires it, and nothing below imports it.
"""
