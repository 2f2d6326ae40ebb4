"""The service-author API of the Spark side: what a service's ``batch.py`` imports to declare its
bootstrap and reconcile jobs (``BatchJobs``) and to read the net bags the framework hands them.

Apart from ``ivmstream.sdk`` because it imports pyspark, which engines must not reach.
"""

from ivmstream.spark.decode import DECIMAL, KEY, MULT
from ivmstream.spark.jobs import BatchError, BatchJobs

__all__ = ["DECIMAL", "KEY", "MULT", "BatchError", "BatchJobs"]
