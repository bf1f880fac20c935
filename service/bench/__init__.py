"""`make bench` (`python -m service.bench`): engine, sizing and answer costs in-process, load on a real server
process (h2load or a grpc.aio fallback), overload and reload figures. The top of the house: may import
anything, nothing imports it.
"""
