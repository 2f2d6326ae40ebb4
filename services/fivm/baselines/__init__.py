"""Baseline maintenance strategies for the fivm engine (docs/fivm/baselines.md).

Each baseline is a maintainer behind ``FivmEngine`` (same intake, same state layout as named views),
selected by ``strategy``: first-order IVM, a DBToaster-style view hierarchy with scalar or ring
payloads, re-evaluation over the view tree or the flat join, the degree-indexed SQL-OPT payloads,
and the payload representations of conjunctive queries.
"""
