"""GPU Advisor: which GPU (or a model API) fits an AI workload, and why.

The house, from the bottom up (a package imports only packages below it; tests/test_layout.py keeps it so):
physics, money, memo, children -> domain -> engine -> render -> decide -> wire -> rulebook -> serving ->
frontends -> bench. A request flows validate (wire) -> brief (domain) -> sizing, facts, rules by stage, rank,
route, render (decide) -> response (wire), served by serving.
"""
