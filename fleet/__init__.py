"""The fleet: many session daemons (one per device, on one host or many) behind one API.

Workers are daemons registered with NVIDIA Dynamo's distributed runtime; a gateway places each new
session on the worker whose admission accepts it with the most headroom and records the binding in
Redis, fenced by an epoch. The runtime is an optional extra (`fleet`): only the modules that talk
to it import it, and lazily.
"""
