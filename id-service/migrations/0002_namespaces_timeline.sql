-- Namespace bounds and block limits set at creation, a counter of IDs granted, and the identity
-- of the database (system identifier and WAL timeline) at each namespace's last grant.
--
-- A grant that finds the database on another timeline or system than the namespace's last grant
-- (an asynchronous failover promoted a standby, a point-in-time restore, a restore into a new
-- cluster) may be looking at a ledger that lost its last leases. Before granting it moves the
-- cursor past the ledger's own end plus a margin, and past the highest ID the caller reports
-- holding. See docs/leases.md, "After a failover or restore".

ALTER TABLE id_namespaces
    ADD COLUMN first_id bigint NOT NULL DEFAULT 1 CHECK (first_id >= 1),
    -- The largest block one lease may be in this namespace (NULL: the server's maximum).
    ADD COLUMN max_block bigint CHECK (max_block >= 1),
    -- IDs in leases granted (skipped IDs not included).
    ADD COLUMN ids_granted bigint NOT NULL DEFAULT 0 CHECK (ids_granted >= 0),
    -- pg_control_system().system_identifier and the WAL insertion timeline of the last grant.
    ADD COLUMN pg_system_id bigint,
    ADD COLUMN pg_timeline bigint,
    ADD COLUMN timeline_jumps bigint NOT NULL DEFAULT 0,
    ADD COLUMN last_jump_at timestamptz,
    ADD CONSTRAINT id_namespaces_first_within_max CHECK (first_id <= max_id);

-- DescribeNamespace: the first lease of the last hour, found without scanning the ledger.
CREATE INDEX id_leases_namespace_leased_at ON id_leases (namespace, leased_at);

-- The identity of the database this transaction writes to. The timeline comes from the name of
-- the WAL segment at the insert position: it is the timeline new WAL is written on, right after
-- a promotion too (pg_control_checkpoint() would show the old one until the next checkpoint).
-- Fails during recovery: a standby grants nothing anyway.
CREATE FUNCTION id_database_identity(OUT system_id bigint, OUT timeline bigint)
LANGUAGE sql VOLATILE AS $$
    SELECT (SELECT c.system_identifier FROM pg_control_system() c),
           ('x' || substr(pg_walfile_name(pg_current_wal_insert_lsn()), 1, 8))::bit(32)::bigint
$$;

UPDATE id_namespaces n
   SET ids_granted = coalesce(
           (SELECT sum(upper(l.ids) - lower(l.ids)) FROM id_leases l WHERE l.namespace = n.name), 0),
       (pg_system_id, pg_timeline) = (SELECT i.system_id, i.timeline FROM id_database_identity() i);

-- Creates a namespace and its sequence unless the name exists; returns whether it created it.
-- Safe to call concurrently.
CREATE FUNCTION id_create_namespace(p_name text, p_first_id bigint, p_max_id bigint,
                                    p_max_block bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_seq text;
BEGIN
    IF EXISTS (SELECT 1 FROM id_namespaces WHERE name = p_name) THEN
        RETURN false;
    END IF;
    -- Serialise creators so two replicas cannot race on the same name.
    PERFORM pg_advisory_xact_lock(hashtext('id_namespaces'));
    IF EXISTS (SELECT 1 FROM id_namespaces WHERE name = p_name) THEN
        RETURN false;
    END IF;
    v_seq := 'id_seq_' || md5(p_name);
    EXECUTE format(
        'CREATE SEQUENCE %I AS bigint INCREMENT BY 1 MINVALUE 1 MAXVALUE %s START WITH %s CACHE 1 NO CYCLE',
        v_seq, p_max_id, p_first_id);
    INSERT INTO id_namespaces (name, seq, max_id, first_id, max_block, pg_system_id, pg_timeline)
    SELECT p_name, v_seq::regclass, p_max_id, p_first_id, p_max_block, i.system_id, i.timeline
      FROM id_database_identity() i;
    RETURN true;
END
$$;

-- The previous release's creator, kept for replicas of that release during a rolling upgrade.
CREATE OR REPLACE FUNCTION id_ensure_namespace(p_name text, p_max_id bigint) RETURNS void
LANGUAGE sql AS $$
    SELECT id_create_namespace(p_name, 1, p_max_id, NULL);
$$;

-- Grants the next `p_size` IDs of a namespace to `p_holder` and records the lease.
--
-- Call it as a statement of its own (autocommit): the lease is durable when the statement's
-- transaction commits, because this function forces synchronous_commit on for it. Before the
-- grant, under the namespace's row lock, it moves the cursor forward (never back):
--   * when the database is on another timeline or system than the namespace's last grant,
--     past the ledger's own end plus max(p_margin_ids, p_margin_leases * the largest of the
--     namespace's last 1000 leases);
--   * past p_high_water, the caller's report of one past the highest ID it holds, unless that
--     is more than p_max_ahead above the cursor (then it raises IH001 and changes nothing).
-- Every check that can refuse runs before the first sequence call, so a refusal writes nothing.
-- Raises P0002 for an unknown namespace, 22023 for a size above the namespace's block limit and
-- 2200H when the namespace is exhausted (the cursor never passes max_id, it never wraps).
CREATE FUNCTION id_grant(p_namespace text, p_size bigint, p_holder text, p_high_water bigint,
                         p_margin_ids bigint, p_margin_leases bigint, p_max_ahead bigint)
RETURNS TABLE (lease_id bigint, first_id bigint, end_id bigint, leased_at timestamptz,
               skipped_from bigint, new_timeline boolean, reported_ahead boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_ns          id_namespaces%ROWTYPE;
    v_system      bigint;
    v_timeline    bigint;
    v_next        numeric;
    v_target      numeric;
    v_ledger_end  bigint;
    v_largest     bigint;
    v_new_tl      boolean := false;
    v_reported    boolean := false;
    v_first       bigint;
    v_end         bigint;
BEGIN
    -- Whatever the server or session default: the commit of this transaction waits for its WAL
    -- (including the sequence advance) to be flushed, so a reply is only sent for a lease that
    -- survives a crash.
    SET LOCAL synchronous_commit = on;
    IF p_size IS NULL OR p_size < 1 THEN
        RAISE EXCEPTION 'lease size must be at least 1, got %', p_size
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The row lock serialises grants within the namespace: sequence operations are not
    -- transactional, so they must not interleave with another grant's.
    SELECT * INTO v_ns FROM id_namespaces n WHERE n.name = p_namespace FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'namespace % does not exist', p_namespace USING ERRCODE = 'no_data_found';
    END IF;
    IF v_ns.max_block IS NOT NULL AND p_size > v_ns.max_block THEN
        RAISE EXCEPTION 'size % is above the maximum block of namespace % (%)',
            p_size, p_namespace, v_ns.max_block USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT i.system_id, i.timeline INTO v_system, v_timeline FROM id_database_identity() i;
    -- The ID a grant would start at without any move.
    v_next := coalesce(pg_sequence_last_value(v_ns.seq)::numeric + 1, v_ns.first_id);
    v_target := v_next;
    IF v_ns.pg_system_id IS DISTINCT FROM v_system OR v_ns.pg_timeline IS DISTINCT FROM v_timeline
    THEN
        v_new_tl := true;
        SELECT max(upper(t.ids)), max(upper(t.ids) - lower(t.ids)) INTO v_ledger_end, v_largest
          FROM (SELECT l.ids FROM id_leases l WHERE l.namespace = p_namespace
                 ORDER BY l.lease_id DESC LIMIT 1000) t;
        v_target := greatest(v_next, coalesce(v_ledger_end, 0))
                    + greatest(coalesce(p_margin_ids, 0)::numeric,
                               coalesce(p_margin_leases, 0)::numeric * coalesce(v_largest, 0));
    END IF;
    IF coalesce(p_high_water, 0) > v_target THEN
        IF p_high_water - v_target > coalesce(p_max_ahead, 0) THEN
            RAISE EXCEPTION 'the reported high water % is % IDs above the cursor of namespace %; at most % is accepted',
                p_high_water, p_high_water - v_target, p_namespace, coalesce(p_max_ahead, 0)
                USING ERRCODE = 'IH001';
        END IF;
        v_reported := true;
        v_target := p_high_water;
    END IF;
    IF v_target > v_next THEN
        -- Never past the bound: a namespace moved beyond it is exhausted.
        PERFORM setval(v_ns.seq, least(v_target - 1, v_ns.max_id::numeric)::bigint, true);
    END IF;
    -- Raises sequence_generator_limit_exceeded (2200H) past MAXVALUE: never wraps.
    v_first := nextval(v_ns.seq);
    -- The last block of a namespace may be shorter than asked for.
    v_end := LEAST(v_first::numeric + p_size, v_ns.max_id::numeric + 1)::bigint;
    IF v_end - 1 > v_first THEN
        PERFORM setval(v_ns.seq, v_end - 1, true);
    END IF;
    UPDATE id_namespaces n
       SET ids_granted = n.ids_granted + (v_end - v_first),
           pg_system_id = v_system,
           pg_timeline = v_timeline,
           timeline_jumps = n.timeline_jumps + CASE WHEN v_new_tl THEN 1 ELSE 0 END,
           last_jump_at = CASE WHEN v_new_tl THEN now() ELSE n.last_jump_at END
     WHERE n.name = p_namespace;
    RETURN QUERY
        INSERT INTO id_leases AS l (namespace, ids, holder)
        VALUES (p_namespace, int8range(v_first, v_end), p_holder)
        RETURNING l.lease_id, lower(l.ids), upper(l.ids), l.leased_at,
                  CASE WHEN v_first > v_next THEN v_next::bigint END, v_new_tl, v_reported;
END
$$;

-- The previous release's grant, kept for its replicas during a rolling upgrade; it gets the
-- timeline check too (with the default margins), and reports no high water.
CREATE OR REPLACE FUNCTION id_grant_lease(p_namespace text, p_size bigint, p_holder text)
RETURNS TABLE (lease_id bigint, first_id bigint, end_id bigint, leased_at timestamptz)
LANGUAGE sql AS $$
    SELECT g.lease_id, g.first_id, g.end_id, g.leased_at
      FROM id_grant(p_namespace, p_size, p_holder, NULL, 1000000, 1000, 0) g;
$$;
