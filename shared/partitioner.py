"""Kafka's default key partitioner (murmur2, as the Java client and librdkafka's murmur2_random).

Batch jobs that write per-partition state (Spark bootstrap) must place each key in the partition the
producers send it to; this is that function.
"""

from __future__ import annotations

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (seed 0x9747b28c) as an unsigned 32-bit value."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    tail = length & ~3
    for i in range(0, tail, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def partition_for(key: bytes | str | None, partitions: int) -> int:
    """The partition a keyed record lands on; unkeyed records form one stream on partition 0."""
    if key is None:
        return 0
    if isinstance(key, str):
        key = key.encode()
    return (murmur2(key) & 0x7FFFFFFF) % partitions
