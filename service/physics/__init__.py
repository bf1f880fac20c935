"""Physics: bytes, FLOPs and tokens per second for a model on a GPU. Pure functions of numbers; imports nothing of
the service.
"""
