"""The rule author's toolchain and the live rules: a rules folder read safely (`files`), loaded and checked into
one immutable version (`folder`, `checks`), compiled into an engine (`version`), its rule tests (`ruletests`,
`expectations`), vetting in a killable child (`vetting`) and the store that swaps versions (`store`).
May import: decide, engine, render, domain, wire (rule tests run briefs through the proto mapping), children.
Never serving or front ends.
"""
