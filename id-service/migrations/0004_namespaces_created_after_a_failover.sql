-- A namespace created on a database that has been through a failover (or a recovery: any
-- timeline past the first) records no database identity, so that its first grant moves past
-- the failover margin. Its creation may repeat one that an asynchronous failover lost together
-- with every lease granted from it: callers that died or restarted since cannot report what
-- they held, and without the margin the first grant would start at `first_id` again. A
-- namespace created on the first timeline of its system keeps starting at `first_id`.
CREATE OR REPLACE FUNCTION id_create_namespace(p_name text, p_first_id bigint, p_max_id bigint,
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
    SELECT p_name, v_seq::regclass, p_max_id, p_first_id, p_max_block,
           CASE WHEN i.timeline = 1 THEN i.system_id END,
           CASE WHEN i.timeline = 1 THEN i.timeline END
      FROM id_database_identity() i;
    RETURN true;
END
$$;
