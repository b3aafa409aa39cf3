"""The protocol, pure (no I/O; a test forbids I/O imports): barrier alignment and the input
processor, the checkpoint coordinator, the two-phase-commit ledger, recovery and resume
decisions, watermarks, flow control, control messages, the job identity, record limits
and the names of topics, groups, transactional ids and headers.
"""
