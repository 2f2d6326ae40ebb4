"""The ordered structures the plans are built from (docs/vwap/algorithm.md §2, §3).

``rpai``: the RPAI tree, an ordered map with parent-relative keys; ``index``: the inequality aggregate
index built from two of them, and exact thresholds on its keys; ``vec``: vector payloads.
"""
