"""Payload rings for F-IVM view trees (docs/algorithms/fivm.md §2.8)."""
