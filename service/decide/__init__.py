"""The decision: sizing of every GPU (`sizing/`, one module per workload kind), facts for the rules, the
advisor that runs rules by stage, ranks, routes and renders (`advisor`), the rules version it reads
(`book`), and which missing fields could change the route (`provisional`).
May import: engine, render, domain, physics, money, memo. Never wire, rulebook, serving or front ends.
"""
