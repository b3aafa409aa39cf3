"""The runtime, which does the I/O: tasks, channels, state, checkpoint storage, sinks, the worker
process, the runner (supervisor and coordinator shell) and the control topic.
"""
