"""The dataflow model, pure: the job a user builds (`stream.py`, `job.py`) and the contracts
users implement (`inputs.py`, `outputs.py`), the graph and the plan it compiles to, serdes,
state interfaces (`state/`), window and join operators (`operators/`), and the identity a
checkpoint records.
"""
