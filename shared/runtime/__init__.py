"""The shared streaming runtime: one consumer loop for every service."""

from ivmstream.runtime.worker import Worker

__all__ = ["Worker"]
