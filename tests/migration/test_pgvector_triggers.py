"""A pgvector table's triggers carried by its migration in place (issue #46 item 3), on the real
PostgreSQL + pgvector (pgserver): an audit-log trigger (and a disabled one) created again on the
new table, firing on the rows written after the swap and never during the copy; the backup keeps
its own, so a rollback serves them as they were; into a new table they stay on the input."""

from __future__ import annotations

import numpy as np
import pytest

from relrep_hf.migration import open_store
from relrep_hf.migration.migrate import plan_migration
from relrep_hf.migration.rollback import rollback_store
from tests.migration.test_databases import D_NEW, D_OLD, a_map, applied, migrate, table_name
from tests.migration.test_store_safety import pg_execute, pg_table

pytestmark = pytest.mark.slow  # a PostgreSQL server is started for the module


def with_audit(postgres: str, name: str) -> str:
    """``name`` (12 rows) with an audit-log trigger (every insert, update and delete logged in
    ``name_log``, with the table it fired on) and a disabled trigger that would refuse inserts."""
    uri = pg_table(postgres, name)
    pg_execute(
        postgres,
        f"CREATE TABLE {name}_log (op text, id int, on_table text)",
        f"CREATE FUNCTION {name}_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"INSERT INTO {name}_log VALUES (TG_OP, COALESCE(NEW.id, OLD.id), TG_TABLE_NAME); "
        "RETURN NULL; END $$",
        f"CREATE TRIGGER audit AFTER INSERT OR UPDATE OR DELETE ON {name} FOR EACH ROW "
        f"EXECUTE FUNCTION {name}_audit()",
        f"CREATE FUNCTION {name}_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "RAISE EXCEPTION 'refused'; END $$",
        f"CREATE TRIGGER refuse BEFORE INSERT ON {name} FOR EACH ROW EXECUTE FUNCTION "
        f"{name}_refuse()",
        f"ALTER TABLE {name} DISABLE TRIGGER refuse",
    )
    return uri


def triggers(postgres: str, table: str) -> list[tuple]:
    return pg_execute(
        postgres,
        "SELECT tgname, tgenabled, pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = "
        f"'{table}'::regclass AND NOT tgisinternal ORDER BY 1",
    )[0]


def log(postgres: str, name: str) -> list[tuple]:
    return pg_execute(postgres, f"SELECT op, id, on_table FROM {name}_log ORDER BY 1, 2")[0]


def test_triggers_are_carried_in_place_and_kept_on_the_backup(postgres):
    name = table_name()
    uri = with_audit(postgres, name)
    old = open_store(uri).read_all()
    before = triggers(postgres, name)
    assert [(t, e) for t, e, _ in before] == [("audit", "O"), ("refuse", "D")]
    plan = plan_migration(a_map(), uri, uri)
    assert plan.dropped == [] and plan.blocked == []
    assert (
        "triggers 'audit', 'refuse' (created again on the new table; the backup keeps its own)"
        in (plan.carried)
    )
    out = migrate(uri, uri, overwrite=True)  # no --force: nothing is dropped
    assert log(postgres, name) == []  # the copy fired no trigger (and "refuse" stayed disabled)
    assert open_store(uri).dim == D_NEW
    np.testing.assert_allclose(open_store(uri).read_all(), applied(a_map(), old), atol=1e-4)
    # the served table has both triggers, as they were; the backup keeps its own
    assert triggers(postgres, name) == before
    assert [(t, e) for t, e, _ in triggers(postgres, out.backup)] == [
        ("audit", "O"),
        ("refuse", "D"),
    ]
    new_vector, old_vector = [0.5] * D_NEW, [0.5] * D_OLD
    pg_execute(
        postgres,
        f"INSERT INTO {name} (body, embedding) VALUES ('new', '{new_vector}')",
        f"UPDATE {name} SET body = 'changed' WHERE id = 3",
        f"DELETE FROM {name} WHERE id = 4",
    )
    assert log(postgres, name) == [("DELETE", 4, name), ("INSERT", 13, name), ("UPDATE", 3, name)]
    # a rollback serves the backup, whose triggers fire on what is written to it then
    pg_execute(postgres, f"DELETE FROM {name} WHERE id = 13", f"DELETE FROM {name}_log")
    rollback_store(uri)
    assert open_store(uri).dim == D_OLD and triggers(postgres, name) == before
    pg_execute(postgres, f"INSERT INTO {name} (body, embedding) VALUES ('back', '{old_vector}')")
    assert [op for op, _, table in log(postgres, name) if table == name] == ["INSERT"]


def test_into_a_new_table_the_triggers_stay_on_the_input(postgres):
    name = table_name()
    uri = with_audit(postgres, name)
    before = triggers(postgres, name)
    plan = plan_migration(a_map(), uri, f"{postgres}&table={name}_new")
    assert "triggers 'audit', 'refuse' (they stay on the input)" in plan.input_only
    migrate(uri, f"{postgres}&table={name}_new")
    assert triggers(postgres, name) == before and triggers(postgres, f"{name}_new") == []
    assert log(postgres, name) == []
