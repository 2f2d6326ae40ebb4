"""Where a Spark reconciliation verdict is recorded, for the workers' metrics endpoints."""

RECONCILE_PREFIX = "ivmstream:reconcile"


def reconcile_key(output_topic: str) -> str:
    return f"{RECONCILE_PREFIX}:{output_topic}"
