"""The SQL front end: one SQL file in, each view routed to the service built for its class.

``load_script`` reads a file (DBToaster, F-IVM, IMP and Kafka-DDL dialects) into a checked model;
``plan_script`` recognises each view's class and builds the chosen service's configuration through
its declared options; ``explain`` says which service, why and at what cost; ``replay_script`` runs
the views over their ``FROM FILE`` inputs. docs/sql.md describes the dialects and the classes.
"""

from ivmstream.sql.errors import Position, SqlError
from ivmstream.sql.load import load_script

__all__ = ["Position", "SqlError", "load_script"]
