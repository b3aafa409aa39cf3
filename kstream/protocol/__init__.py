"""The protocol, pure (no I/O; a test forbids I/O imports): barrier alignment, the checkpoint
coordinator, the two-phase-commit ledger, liveness, checkpoint history, counters, record limits
and the names of topics, groups, transactional ids and headers.
"""
