"""The service-author API: everything a service under ``ivmstream.services`` (or in another
distribution) imports from the platform, and nothing else.

Services import the platform only from here (``ivmstream.sdk``) and, for their Spark batch jobs, from
``ivmstream.sdk.batch``; an import-linter contract checks it. This module stays pure (no Kafka, Redis,
RocksDB or Spark), so engines, options and declarations can import it. Every other platform module is
internal: its names may change without notice.
"""

from ivmstream.backed_map import StoreBackedMap
from ivmstream.engine import (
    JSON,
    ColumnarEngine,
    CountsPendingChanges,
    Engine,
    EngineError,
    EngineStats,
    Entry,
    EntryChange,
    IncrementalEngine,
    Rejection,
    StoreBackedEngine,
    StoredMap,
    json_bytes,
)
from ivmstream.events import (
    COLUMN_TYPES,
    InputFormat,
    ReadOption,
    ReadRequest,
    Relation,
    SourceError,
    SourceRecord,
    UpdateEvent,
)
from ivmstream.events.columns import EventColumns, RelationColumns
from ivmstream.events.floats import state_bytes, state_loads
from ivmstream.events.tpch import TPCH_TABLES
from ivmstream.options import (
    Option,
    Parser,
    boolean,
    choice,
    fraction,
    mapping,
    non_negative_int,
    optional,
    positive_int,
    positive_number,
    string,
)
from ivmstream.relations import (
    BARE_COLUMN_TYPE,
    COLUMN_TYPE_MEANINGS,
    TPCH,
    RelationAlias,
    declared_aliases,
    declared_relations,
    describe,
    parse_relations,
    relation_columns,
    relations_option,
    relations_parser,
)
from ivmstream.service import DemoWorkload, ServiceDefinition, Sharding

__all__ = [
    "BARE_COLUMN_TYPE",
    "COLUMN_TYPES",
    "COLUMN_TYPE_MEANINGS",
    "JSON",
    "TPCH",
    "TPCH_TABLES",
    "ColumnarEngine",
    "CountsPendingChanges",
    "DemoWorkload",
    "Engine",
    "EngineError",
    "EngineStats",
    "Entry",
    "EntryChange",
    "EventColumns",
    "IncrementalEngine",
    "InputFormat",
    "Option",
    "Parser",
    "ReadOption",
    "ReadRequest",
    "Rejection",
    "Relation",
    "RelationAlias",
    "RelationColumns",
    "ServiceDefinition",
    "Sharding",
    "SourceError",
    "SourceRecord",
    "StoreBackedEngine",
    "StoreBackedMap",
    "StoredMap",
    "UpdateEvent",
    "boolean",
    "choice",
    "declared_aliases",
    "declared_relations",
    "describe",
    "fraction",
    "json_bytes",
    "mapping",
    "non_negative_int",
    "optional",
    "parse_relations",
    "positive_int",
    "positive_number",
    "relation_columns",
    "relations_option",
    "relations_parser",
    "state_bytes",
    "state_loads",
    "string",
]
