"""What the benchmark scripts share: progress lines, the machine a report was measured on, bulk
producing to the embedded broker, time limits that stop work cooperatively, and report writers.

Each module is small and imports nothing heavy at import time except ``plots`` (matplotlib), which a
script imports before it starts any clock.
"""
