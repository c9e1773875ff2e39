-- Callers' quotas, shared by every replica on this database: one GCRA cell per caller and kind
-- (`ids`, `leases`). Each replica charges the cell before it grants, in slices (see
-- id-service/src/auth/shared_quota.rs), so a caller spread over any number of replicas gets its
-- quota once in all, not once per replica. Times are the database's own clock, so the replicas'
-- clocks never matter.

CREATE TABLE id_caller_quotas (
    caller text COLLATE "C" NOT NULL,
    kind   text COLLATE "C" NOT NULL CHECK (kind IN ('ids', 'leases')),
    -- The bucket's theoretical arrival time, in microseconds since the epoch: the bucket is full
    -- when this is not after now, and empty when it is `burst / rate` seconds after now.
    tat_us double precision NOT NULL,
    PRIMARY KEY (caller, kind)
);

-- Takes `p_count` tokens from the caller's bucket of `p_burst` tokens refilled at `p_rate` a
-- second. Returns 0 when they were taken, else the microseconds until they could be (then
-- nothing is taken).
CREATE FUNCTION id_take_quota(p_caller text, p_kind text, p_count bigint, p_rate bigint,
                              p_burst bigint)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_interval double precision;
    v_now      double precision;
    v_tat      double precision;
    v_new      double precision;
BEGIN
    IF p_count < 1 OR p_rate < 1 OR p_burst < 1 THEN
        RAISE EXCEPTION 'quota count, rate and burst must be at least 1'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A charge lost in a crash gives a caller a little more, never fewer IDs: no need to wait
    -- for the WAL flush.
    SET LOCAL synchronous_commit = off;
    INSERT INTO id_caller_quotas (caller, kind, tat_us) VALUES (p_caller, p_kind, 0)
        ON CONFLICT (caller, kind) DO NOTHING;
    SELECT q.tat_us INTO v_tat FROM id_caller_quotas q
     WHERE q.caller = p_caller AND q.kind = p_kind FOR UPDATE;
    -- Read after the row lock: a charge that waited for another is judged at its own time.
    v_now := extract(epoch FROM clock_timestamp()) * 1e6;
    v_interval := 1e6 / p_rate;
    v_new := GREATEST(v_tat, v_now) + p_count * v_interval;
    IF v_new - v_now > p_burst * v_interval THEN
        RETURN GREATEST(ceil(v_new - v_now - p_burst * v_interval), 1)::bigint;
    END IF;
    UPDATE id_caller_quotas SET tat_us = v_new WHERE caller = p_caller AND kind = p_kind;
    RETURN 0;
END
$$;
