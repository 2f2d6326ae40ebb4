"""Developer tooling, not part of a production worker: the embedded Kafka-wire broker, a local
redis-server launcher and the ``ivmstream demo`` stack built from them."""
