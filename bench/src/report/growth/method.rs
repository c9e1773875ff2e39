//! How the figures are made: the prose closing the section, with the run's settings in it.

use crate::growth::{Growth, count_label};
use std::fmt::Write;

/// The method notes: loading, each point, creates, cache misses and statements.
pub(super) fn method(s: &mut String, g: &Growth) {
    let st = &g.settings;
    let _ = writeln!(s, "### How these figures are made\n");
    let _ = writeln!(
        s,
        "- **Loading.** One database per layout on the group's own cluster. `shortener migrate` makes the \
         node's schema, `set_layout` (`bench/src/growth/layout.rs`) gives it the layout with `shortener \
         layout status` / `shortener layout revert`, and `shortener preload` (IDs leased from the \
         id-service, the key's codes, the store's batched insert) writes the links in chunks of {} \
         within a time budget, keeping a uniform sample of the codes it prints. After each step, \
         `VACUUM (ANALYZE) links`, as autovacuum would have left an older table. Before the first \
         point, {} links are loaded whose codes serve the cache-miss runs at the smallest size, so the \
         smallest size has those rows; every point also starts with the rows earlier points created \
         (the rows-at-start column).",
        count_label(st.chunk),
        st.probe()
    );
    let _ = writeln!(
        s,
        "- **Each point** restarts PostgreSQL with its shared_buffers (`ALTER SYSTEM`, a fast shutdown, \
         which checkpoints, and a start): every point begins right after a checkpoint with empty shared \
         buffers and the kernel's page cache as the load left it. Then a fresh id-service and node \
         (release build, on core 0; this process on core 1; PostgreSQL unpinned)."
    );
    let _ = writeln!(
        s,
        "- **Creates.** {} clients, one call in flight each, on their own connections: `POST /api/v1/links` \
         and gRPC `BatchCreateLinks` of {} (links/s counts the items), alternated {} time{}; the same \
         driver as `bench creates` (`bench/src/creates.rs`). WAL per create is the change of \
         `pg_current_wal_lsn()` over each run divided by the links it created, warm-up included \
         (the whole cluster's WAL: the id-service's few leases count too). The buffer hit ratio is \
         `blks_hit / (blks_hit + blks_read)` of the links database in `pg_stat_database` over the \
         create runs, read after the node has stopped (backends report when they exit).",
        st.clients,
        st.batch,
        st.reps,
        if st.reps == 1 { "" } else { "s" }
    );
    let _ = writeln!(
        s,
        "- **Cache misses.** Another fresh node (empty cache); once no autovacuum worker is busy in \
         the database, a `CHECKPOINT`, so that the write-back of the create runs (the checkpoint their \
         WAL started, dirty buffers a lookup would otherwise write out before reusing) is not timed \
         with the reads; then {0} sampled codes that no earlier point \
         requested, each once, over {1} keep-alive connections (the node's pool size); every answer must \
         be a 302. Latency is per request; the hit ratio is the database's over these requests. Then \
         the links table and its primary key (the \"table + primary key\" column: all that a miss reads) \
         are read in with pg_prewarm, all of both into the kernel's page cache (`'read'`) and then \
         into shared buffers as far as they hold them (`'buffer'`, the table and then the key), and \
         {0} other sampled codes are requested the same way (the \"prewarmed\" columns): the first \
         run is the caches as the load and the create runs left them, the second a primary that has \
         been answering misses long enough to hold what they read, as far as its memory allows. \
         Both are closed loops (each connection sends its next request when answered), so they \
         keep the machine busy and their tails are mostly queueing. Then, on another fresh node, \
         {0} other sampled codes offered at {2:.0} requests/s, well below what the machine \
         answers, spread over the same connections (an open loop: latency from each request's \
         intended send time, so a request held up behind a slow one counts its wait; the \
         \"at {2:.0}/s\" columns): a miss's own latency on a primary that is not saturated. \
         Last, the baseline: {0} more sampled codes looked up straight in PostgreSQL over {1} \
         connections of their own, with the node's statement shape (`WHERE slot = $1 AND code = $2` \
         in the slot layout, prepared), no node in between (the \"straight to PostgreSQL\" columns).",
        st.misses, st.miss_connections, st.miss_rate
    );
    let _ = writeln!(
        s,
        "- **Statements.** pg_stat_statements (loaded through `shared_preload_libraries`) is reset after \
         each load step, so its top 10 covers the measured points of the largest size only, every \
         shared_buffers setting (its counts survive the clean restarts)."
    );
    s.push('\n');
}
