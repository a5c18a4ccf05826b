"""What a pgvector table's migration carries to the new table, and what it cannot: read from the
catalog before anything is written (`table_plan`), and carried inside the migration's
transaction (`carry_to`).

Carried: row-level security (enabled, forced) and its policies, the table's comment, its
grants, its tablespace, its outgoing foreign keys (and, by ``CREATE TABLE ... LIKE``, its
defaults, CHECK constraints, column comments and storage; its indexes are rebuilt by
`relrep_hf.migration.stores.pgvector`), and, in place, its triggers: created again on the new
table from their definitions (``pg_get_triggerdef``, enabled state included) once it has the
table's name, after the copy, so the copy fires none; the backup keeps its own, so a rollback
serves them as they were (into a new table, the triggers stay on the input). Refused unless
forced, because they would be lost without a word: foreign keys of other tables that point at
it and views that read it (both would keep following the old table, the backup), a foreign key
to the table itself (the new
table's would point at the old one), partitioning and inheritance, another owner than the
migrating role. Refused always: generated columns (a binary COPY cannot fill them) and
an HNSW or IVFFlat index over the vector column beyond pgvector's 2,000 dimensions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from relrep_hf.migration.plan import StorePlan

__all__ = [
    "INDEXED_DIMENSIONS",
    "TableFacts",
    "carry_to",
    "carry_triggers",
    "read_facts",
    "table_plan",
]

INDEXED_DIMENSIONS = 2000  # pgvector's HNSW and IVFFlat limit for vector columns


@dataclass
class TableFacts:
    """What the catalog says of one table (names quoted as SQL identifiers where they are
    written back)."""

    rls: bool = False
    force_rls: bool = False
    policies: list[tuple] = field(
        default_factory=list
    )  # (name, permissive, roles, cmd, using, check)
    comment: str | None = None
    grants: list[tuple[str, str, bool]] = field(
        default_factory=list
    )  # (grantee, privilege, grantable)
    tablespace: str | None = None
    foreign_keys: list[tuple[str, str]] = field(default_factory=list)  # (name, definition)
    self_keys: list[str] = field(default_factory=list)  # foreign keys to the table itself
    triggers: list[str] = field(default_factory=list)
    # (CREATE TRIGGER statement naming the table as it is named now, pg_trigger.tgenabled)
    trigger_definitions: list[tuple[str, str]] = field(default_factory=list)
    referenced_by: list[str] = field(default_factory=list)  # "table.constraint"
    views: list[str] = field(default_factory=list)
    partitioned: str | None = None  # what kind of partitioning or inheritance, if any
    owner: str = ""
    current_user: str = ""
    generated: list[str] = field(default_factory=list)
    vector_indexes: list[str] = field(default_factory=list)  # HNSW / IVFFlat on the column


def read_facts(query, table: str, column: str) -> TableFacts:
    """``table``'s facts; ``query(sql, params)`` runs a catalog query (``table`` is a quoted
    identifier, ``column`` the vector column's name)."""
    oid = "%s::regclass"
    one = query(
        "SELECT relrowsecurity, relforcerowsecurity, obj_description(c.oid, 'pg_class'), "
        "t.spcname, pg_get_userbyid(relowner), current_user, relkind, relispartition "
        f"FROM pg_class c LEFT JOIN pg_tablespace t ON t.oid = c.reltablespace WHERE c.oid = {oid}",
        (table,),
    )[0]
    facts = TableFacts(rls=one[0], force_rls=one[1], comment=one[2], tablespace=one[3])
    facts.owner, facts.current_user = one[4], one[5]
    facts.policies = query(
        "SELECT polname, polpermissive, ARRAY(SELECT CASE WHEN r = 0 THEN 'public' ELSE "
        "quote_ident(pg_get_userbyid(r)) END FROM unnest(polroles) r), polcmd, "
        f"pg_get_expr(polqual, polrelid), pg_get_expr(polwithcheck, polrelid) FROM pg_policy "
        f"WHERE polrelid = {oid} ORDER BY polname",
        (table,),
    )
    facts.grants = query(
        "SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid("
        "a.grantee)) END, a.privilege_type, a.is_grantable FROM pg_class c, aclexplode(c.relacl) a "
        f"WHERE c.oid = {oid} AND a.grantee <> c.relowner ORDER BY 1, 2",
        (table,),
    )
    keys = query(
        f"SELECT conname, pg_get_constraintdef(oid), confrelid = conrelid FROM pg_constraint "
        f"WHERE conrelid = {oid} AND contype = 'f' ORDER BY conname",
        (table,),
    )
    facts.foreign_keys = [(name, definition) for name, definition, own in keys if not own]
    facts.self_keys = [name for name, _, own in keys if own]
    facts.referenced_by = [f"{t}.{c}" for t, c in query(
        "SELECT conrelid::regclass::text, conname FROM pg_constraint WHERE contype = 'f' AND "
        f"confrelid = {oid} AND conrelid <> confrelid ORDER BY 1, 2", (table,))]  # fmt: skip
    triggers = query(
        "SELECT tgname, pg_get_triggerdef(oid), tgenabled FROM pg_trigger WHERE tgrelid = "
        f"{oid} AND NOT tgisinternal ORDER BY 1", (table,))  # fmt: skip
    facts.triggers = [name for name, _, _ in triggers]
    facts.trigger_definitions = [(definition, enabled) for _, definition, enabled in triggers]
    facts.views = [v for (v,) in query(
        "SELECT DISTINCT r.ev_class::regclass::text FROM pg_depend d JOIN pg_rewrite r ON r.oid "
        f"= d.objid WHERE d.refobjid = {oid} AND r.ev_class <> d.refobjid ORDER BY 1",
        (table,))]  # fmt: skip
    inherits = query(
        f"SELECT count(*) FROM pg_inherits WHERE inhrelid = {oid} OR inhparent = {oid}",
        (table, table),
    )[0][0]
    facts.partitioned = (
        "partitioning (a partitioned table)" if one[6] == "p"
        else "partitioning (a partition of another table)" if one[7]
        else "table inheritance" if inherits else None
    )  # fmt: skip
    facts.generated = [a for (a,) in query(
        f"SELECT attname FROM pg_attribute WHERE attrelid = {oid} AND attnum > 0 AND NOT "
        "attisdropped AND attgenerated <> '' ORDER BY attnum", (table,))]  # fmt: skip
    facts.vector_indexes = [i for (i,) in query(
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am m ON "
        "m.oid = c.relam JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)"
        f" WHERE i.indrelid = {oid} AND a.attname = %s AND m.amname IN ('hnsw', 'ivfflat')",
        (table, column))]  # fmt: skip
    return facts


def table_plan(facts: TableFacts, plan: StorePlan, dim: int, in_place: bool) -> StorePlan:
    """``plan`` filled from ``facts`` for a new table of ``dim``-d vectors (``in_place``: it
    takes the input's name, the input kept as the backup)."""
    carried, dropped = plan.carried, plan.dropped
    carried.append("every column's values, defaults, CHECK constraints and column comments")
    carried.append("indexes and primary/unique constraints (rebuilt, under their names)")
    if facts.rls:
        carried.append(f"row-level security{' (forced)' if facts.force_rls else ''}")
    carried += [f"policy {name!r}" for name, *_ in facts.policies]
    carried += ["the table's comment"] if facts.comment is not None else []
    carried += [f"grants to {', '.join(sorted({g for g, *_ in facts.grants}))}"] * bool(
        facts.grants
    )
    carried += [f"tablespace {facts.tablespace!r}"] if facts.tablespace else []
    carried += [f"foreign key {name!r}" for name, _ in facts.foreign_keys]
    if facts.triggers and in_place:
        carried.append(
            f"triggers {', '.join(map(repr, facts.triggers))} (created again on the new table; "
            "the backup keeps its own)"
        )
    elif facts.triggers:
        plan.input_only.append(
            f"triggers {', '.join(map(repr, facts.triggers))} (they stay on the input)"
        )
    dropped += [f"foreign key {name!r} to the table itself (the new table's would point at "
                "the old one)" for name in facts.self_keys]  # fmt: skip
    if in_place:
        dropped += [f"foreign key {r} (it would keep pointing at the backup)"
                    for r in facts.referenced_by]  # fmt: skip
        dropped += [f"view {v} (it would keep reading the backup)" for v in facts.views]
    if facts.partitioned:
        dropped.append(f"{facts.partitioned}: the new table is one plain table")
    if facts.owner != facts.current_user:
        dropped.append(f"the owner {facts.owner!r} (the new table is {facts.current_user!r}'s)")
    plan.blocked += [
        f"generated column {name!r} (a binary COPY cannot fill it)" for name in facts.generated
    ]
    if dim > INDEXED_DIMENSIONS and facts.vector_indexes:
        plan.blocked.append(
            f"index {facts.vector_indexes[0]!r} on {dim}-d vectors: pgvector's HNSW and IVFFlat "
            f"indexes take at most {INDEXED_DIMENSIONS} dimensions (drop the index, or use "
            "halfvec yourself)"
        )
    return plan


def carry_to(writer, new: str, facts: TableFacts, quote) -> None:
    """Row-level security, policies, the comment, grants and foreign keys onto ``new`` (a
    quoted identifier), in ``writer``'s transaction; ``quote(name)`` quotes an identifier."""
    from psycopg import sql

    if facts.rls:
        writer.execute(f"ALTER TABLE {new} ENABLE ROW LEVEL SECURITY")
    if facts.force_rls:
        writer.execute(f"ALTER TABLE {new} FORCE ROW LEVEL SECURITY")
    commands = {"r": "SELECT", "a": "INSERT", "w": "UPDATE", "d": "DELETE", "*": "ALL"}
    for name, permissive, roles, command, using, check in facts.policies:
        writer.execute(
            f"CREATE POLICY {quote(name)} ON {new} AS "
            f"{'PERMISSIVE' if permissive else 'RESTRICTIVE'} FOR {commands[command]} TO "
            f"{', '.join(roles)}" + (f" USING ({using})" if using is not None else "")
            + (f" WITH CHECK ({check})" if check is not None else "")
        )  # fmt: skip
    if facts.comment is not None:  # a utility statement takes no parameters: a literal
        comment = sql.SQL("COMMENT ON TABLE {} IS {}").format(sql.SQL(new), facts.comment)
        writer.execute(comment)
    for grantee, privilege, grantable in facts.grants:
        option = " WITH GRANT OPTION" if grantable else ""
        writer.execute(f"GRANT {privilege} ON {new} TO {grantee}{option}")
    for name, definition in facts.foreign_keys:
        writer.execute(f"ALTER TABLE {new} ADD CONSTRAINT {quote(name)} {definition}")


# ALTER TABLE's clause for each pg_trigger.tgenabled other than "O" (fires in origin mode)
_TRIGGER_STATES = {"D": "DISABLE", "R": "ENABLE REPLICA", "A": "ENABLE ALWAYS"}


def carry_triggers(writer, table: str, facts: TableFacts, quote) -> None:
    """The triggers of ``facts`` created again, in ``writer``'s transaction, on the table that
    now has the migrated table's name (``table``, quoted): their definitions name the table as it
    was named when read, which is the new table's name once the old one is the backup. Disabled,
    replica and always triggers keep that state."""
    for (definition, enabled), name in zip(facts.trigger_definitions, facts.triggers, strict=True):
        writer.execute(definition)
        if enabled in _TRIGGER_STATES:
            writer.execute(f"ALTER TABLE {table} {_TRIGGER_STATES[enabled]} TRIGGER {quote(name)}")
