-- The lease ledger: namespaces, their ID sequences, and every lease ever granted.
--
-- Each namespace owns one sequence (CACHE 1, NO CYCLE, bounded MAXVALUE) whose value is the
-- last ID granted in that namespace. id_grant_lease() advances it by exactly the lease size while
-- holding the namespace row lock, and records the lease in id_leases in the same transaction.
-- See docs/leases.md for why this is durable and disjoint.

-- Lets the EXCLUDE constraint below compare text with `=` inside a GiST index.
CREATE EXTENSION IF NOT EXISTS btree_gist;

CREATE TABLE id_namespaces (
    name       text COLLATE "C" PRIMARY KEY
               CHECK (name ~ '^[a-z][a-z0-9_]{0,62}$'),
    -- The sequence that holds the namespace's cursor (created by id_ensure_namespace).
    seq        regclass NOT NULL UNIQUE,
    -- The highest ID the namespace may ever grant: the sequence's MAXVALUE.
    max_id     bigint NOT NULL CHECK (max_id >= 1),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE id_leases (
    lease_id   bigint GENERATED ALWAYS AS IDENTITY (CACHE 1) PRIMARY KEY,
    namespace  text COLLATE "C" NOT NULL REFERENCES id_namespaces (name),
    -- The half-open range [first ID, one past the last ID).
    ids        int8range NOT NULL CHECK (NOT isempty(ids) AND lower(ids) >= 1),
    holder     text NOT NULL CHECK (char_length(holder) BETWEEN 1 AND 200),
    leased_at  timestamptz NOT NULL DEFAULT now(),
    -- The database itself proves that no two leases of one namespace share an ID.
    CONSTRAINT id_leases_disjoint EXCLUDE USING gist (namespace WITH =, ids WITH &&)
);

-- ListLeases: newest first within a namespace.
CREATE INDEX id_leases_namespace_lease_id ON id_leases (namespace, lease_id DESC);

-- Creates a namespace and its sequence unless it exists; safe to call concurrently.
CREATE FUNCTION id_ensure_namespace(p_name text, p_max_id bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_seq text;
BEGIN
    IF EXISTS (SELECT 1 FROM id_namespaces WHERE name = p_name) THEN
        RETURN;
    END IF;
    -- Serialise creators so two replicas cannot race on the same name.
    PERFORM pg_advisory_xact_lock(hashtext('id_namespaces'));
    IF EXISTS (SELECT 1 FROM id_namespaces WHERE name = p_name) THEN
        RETURN;
    END IF;
    -- A name derived from a hash, not the namespace itself, so every valid namespace name fits
    -- PostgreSQL's 63-byte identifier limit. CREATE SEQUENCE fails (rather than reusing) if a
    -- sequence of that name is somehow left over.
    v_seq := 'id_seq_' || md5(p_name);
    EXECUTE format(
        'CREATE SEQUENCE %I AS bigint INCREMENT BY 1 MINVALUE 1 MAXVALUE %s START WITH 1 CACHE 1 NO CYCLE',
        v_seq, p_max_id);
    INSERT INTO id_namespaces (name, seq, max_id) VALUES (p_name, v_seq::regclass, p_max_id);
END
$$;

-- Grants the next `p_size` IDs of a namespace to `p_holder` and records the lease.
--
-- Call it as a statement of its own (autocommit): the lease is durable when the statement's
-- transaction commits, because this function forces synchronous_commit on for it.
-- Raises P0002 for an unknown namespace and 2200H when the namespace is exhausted.
CREATE FUNCTION id_grant_lease(p_namespace text, p_size bigint, p_holder text)
RETURNS TABLE (lease_id bigint, first_id bigint, end_id bigint, leased_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    v_seq    regclass;
    v_max    bigint;
    v_first  bigint;
    v_end    bigint;
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
    -- transactional, so nextval + setval must not interleave with another grant's.
    SELECT n.seq, n.max_id INTO v_seq, v_max
      FROM id_namespaces n WHERE n.name = p_namespace FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'namespace % does not exist', p_namespace USING ERRCODE = 'no_data_found';
    END IF;
    -- Raises sequence_generator_limit_exceeded (2200H) past MAXVALUE: never wraps.
    v_first := nextval(v_seq);
    -- The last block of a namespace may be shorter than asked for.
    v_end := LEAST(v_first::numeric + p_size, v_max::numeric + 1)::bigint;
    IF v_end - 1 > v_first THEN
        PERFORM setval(v_seq, v_end - 1, true);
    END IF;
    RETURN QUERY
        INSERT INTO id_leases AS l (namespace, ids, holder)
        VALUES (p_namespace, int8range(v_first, v_end), p_holder)
        RETURNING l.lease_id, lower(l.ids), upper(l.ids), l.leased_at;
END
$$;
