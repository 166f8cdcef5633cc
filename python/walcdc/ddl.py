"""The codes of a DDL event's ``ddl_type`` and ``object_type`` columns: CUBRID's CDC codes
(``cdc_ddl_type`` and ``cdc_ddl_object_type``), written as they come in the log's DDL
supplemental records, named here once."""

from __future__ import annotations

import enum


class DdlType(enum.IntEnum):
    """``ddl_type``: what the statement did."""

    CREATE = 0
    ALTER = 1
    DROP = 2
    RENAME = 3
    TRUNCATE = 4


class ObjectType(enum.IntEnum):
    """``object_type``: what kind of object it did it to."""

    TABLE = 0
    INDEX = 1
    SERIAL = 2
    VIEW = 3
    FUNCTION = 4
    PROCEDURE = 5
    TRIGGER = 6
    USER = 7
