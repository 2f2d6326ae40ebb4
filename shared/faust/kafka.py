"""The Faust runtime's Kafka consumer as the default runtime's: the same security settings (from the
environment and the config's ``kafka`` section, secrets registered for redaction), the same isolation
level, and the same fetch wait.

Faust builds aiokafka's consumer itself: it reads uncommitted records unless Faust's own transactions
are on, and waits up to 1.5 s (fixed) on a fetch. aiokafka keeps one fetch in flight per broker and
leaves out partitions whose records are still buffered, so when only an idle partition is left to
fetch, that fetch holds every other partition of the broker for the whole wait: a worker owning one
idle partition stalls ~1.5 s at a time. The default runtime waits 100 ms (``fetch.wait.max.ms``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiokafka  # type: ignore[import-untyped]
import faust
from aiokafka.helpers import create_ssl_context  # type: ignore[import-untyped]
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread, Consumer, Transport

from ivmstream.config import ConfigError

FETCH_WAIT_MS = 100  # the default runtime's fetch.wait.max.ms (ivmstream.runtime.kafka.consumer_settings)


class _ConsumerThread(AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: Transport) -> aiokafka.AIOKafkaConsumer:
        consumer = super()._create_worker_consumer(transport)
        # read by AIOKafkaConsumer.start(), which builds its fetcher; not yet started here
        consumer._fetch_max_wait_ms = FETCH_WAIT_MS
        consumer._isolation_level = "read_committed"
        return consumer


class _Consumer(Consumer):
    def _new_consumer_thread(self) -> AIOKafkaConsumerThread:
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)


class RuntimeTransport(Transport):
    """aiokafka's transport with the default runtime's fetch wait and isolation level."""

    Consumer = _Consumer


def use_runtime_transport(app: faust.App) -> None:
    """Give ``app`` the ``RuntimeTransport`` (before its consumer exists)."""
    app.transport = RuntimeTransport(app.conf.broker_consumer, app, loop=app.loop)


def broker_credentials(settings: Mapping[str, Any]) -> faust.types.auth.CredentialsT | None:
    """Faust's credentials for librdkafka's security settings (``security.protocol``, ``sasl.*``,
    ``ssl.*``), as every confluent-kafka client of the worker gets them; None for plaintext."""
    protocol = str(settings.get("security.protocol", "plaintext")).upper()
    if protocol == "PLAINTEXT":
        return None
    if protocol not in ("SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ConfigError(f"security.protocol {protocol.lower()} is not supported by the Faust runtime")
    context = None
    if protocol.endswith("SSL"):
        context = create_ssl_context(
            cafile=settings.get("ssl.ca.location"),
            certfile=settings.get("ssl.certificate.location"),
            keyfile=settings.get("ssl.key.location"),
            password=settings.get("ssl.key.password"),
        )
        if str(settings.get("ssl.endpoint.identification.algorithm", "https")).lower() == "none":
            context.check_hostname = False
    if protocol == "SSL":
        return faust.SSLCredentials(context)
    mechanism = str(settings.get("sasl.mechanisms", settings.get("sasl.mechanism", "PLAIN"))).upper()
    if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        raise ConfigError(f"sasl.mechanisms {mechanism} is not supported by the Faust runtime")
    return faust.SASLCredentials(
        username=settings.get("sasl.username"),
        password=settings.get("sasl.password"),
        ssl_context=context,
        mechanism=mechanism,
    )
