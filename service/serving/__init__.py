"""Serving: the gRPC server and its servicer, interceptors (admission, request context), lifecycle and drain,
the probe process, `--processes` workers and reload fan-out, response cache, credentials, signals, metrics
and logging. The only place (with the front ends) that knows grpc's server side.
May import anything below it (rulebook, wire, decide, domain...). Never front ends or bench.
"""
