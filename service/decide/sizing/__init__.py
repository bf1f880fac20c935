"""Sizing: for one brief and each GPU type, how many GPUs, how much memory, how fast, what it costs and
what owning costs. Pure computation over physics/money and the rules' constants: no rules are applied here.
`shape` (what the brief implies) -> `common` (the Sizing record and shared figures) -> `training`,
`inference` (each workload kind) -> `per_request` (the fast path) -> `per_gpu` (`size`, `size_all`).
"""
