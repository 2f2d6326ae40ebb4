"""The shared streaming runtime: one consumer loop for every service."""

from shared.runtime.worker import Worker

__all__ = ["Worker"]
