"""GPU Advisor: a gRPC service that tells a team which GPU, or a model API, fits its AI workload."""
