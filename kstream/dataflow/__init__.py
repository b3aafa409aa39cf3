"""The dataflow model, pure: the job graph a user builds, the plan it compiles to, serdes,
and the identity a checkpoint records.
"""
