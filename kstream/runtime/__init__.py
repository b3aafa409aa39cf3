"""The runtime, which does the I/O. Two sides that never import each other: the worker
(`worker/`: subtasks, the operator chain, dead letters) and the runner (`runner/`: the
coordinator's shell, start-up checks, the supervisor); what both use: keyed state in
RocksDB (`state/`), checkpoints (`checkpoint/`), internal topics (`channels/`), the
control topic and the run's configuration (`config.py`).
"""
