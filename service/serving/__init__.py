"""Serving: the grpc.aio server and its servicer, the dispatcher (request context, admission, the answer on a
bounded thread pool), health, capped streams and reflection, lifecycle and drain, the probe process and its
heartbeat, `--processes` workers and reload fan-out, response cache, credentials, signals, metrics
and logging. The only place (with the front ends) that knows grpc's server side.
May import anything below it (rulebook, wire, decide, domain...). Never front ends or bench.
"""
