//! What happened during a run: every client operation with its outcome and timing, and every
//! fault the nemesis injected. The checker judges the system against this record.

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// The kind of link a create asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A generated code from a leased ID; a URL of its own.
    Generated,
    /// A generated code with an `Idempotency-Key`; indeterminate attempts are retried with it.
    Idempotent,
    /// A generated code with `dedup`; URLs come from a small shared pool so requests collide.
    Dedup,
    /// A custom alias, unique per operation.
    Alias,
    /// A random 16-character private code.
    Private,
}

impl Kind {
    /// Whether the code comes from a leased ID.
    pub fn uses_id(self) -> bool {
        matches!(self, Kind::Generated | Kind::Idempotent | Kind::Dedup)
    }
}

/// The API a create went through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// `POST /api/v1/links`.
    Http,
    /// `shortener.v1.Links/CreateLink`.
    Grpc,
}

/// How an operation ended, as far as the client can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The server acknowledged the create: the link is committed.
    Acked {
        /// The code it returned.
        code: String,
        /// The target URL it returned (serialized form).
        url: String,
    },
    /// The server refused the create in a way that guarantees nothing was stored: a 4xx, or a
    /// 503 because no IDs were in hand, or the request never reached a server.
    Refused {
        /// Why (status and machine code, or the connection error).
        reason: String,
        /// A fail-fast refusal because the node's ID runway ran out.
        out_of_ids: bool,
    },
    /// The outcome is unknown: a timeout, a connection lost mid-request, or a server error that
    /// may have come after the commit.
    Indeterminate {
        /// Why.
        reason: String,
    },
}

/// One create attempt.
#[derive(Debug, Clone)]
pub struct CreateOp {
    /// Sequence number of the attempt within the run.
    pub seq: u64,
    /// The client that sent it.
    pub client: usize,
    /// What was asked for.
    pub kind: Kind,
    /// Through which API.
    pub transport: Transport,
    /// The node it was sent to.
    pub node: usize,
    /// The node's incarnation (start count) when the request was sent and when it ended.
    pub incarnations: (u32, u32),
    /// The target URL sent.
    pub url: String,
    /// The alias sent, if any.
    pub alias: Option<String>,
    /// The idempotency key sent, if any.
    pub idempotency_key: Option<String>,
    /// When it was sent, from the start of the run.
    pub start: Duration,
    /// How long until the client had an answer (or gave up).
    pub elapsed: Duration,
    /// The result.
    pub outcome: Outcome,
}

impl CreateOp {
    /// When the client had its answer, from the start of the run.
    pub fn end(&self) -> Duration {
        self.start + self.elapsed
    }
}

/// How a redirect read ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOutcome {
    /// A redirect to the acknowledged URL.
    Redirected,
    /// A redirect elsewhere: always a violation.
    Wrong(String),
    /// A 404 or 410 (the status) for an acknowledged link: a violation, unless the checker counts
    /// that create as lost in an asynchronous failover (then the read saw the loss, no more).
    Missing(u16),
    /// 5xx, timeout or connection error.
    Failed(String),
}

/// One redirect read of an acknowledged link.
#[derive(Debug, Clone)]
pub struct ReadOp {
    /// The node asked.
    pub node: usize,
    /// The code read.
    pub code: String,
    /// When it was sent, from the start of the run.
    pub start: Duration,
    /// How long it took.
    pub elapsed: Duration,
    /// The result.
    pub outcome: ReadOutcome,
}

/// A fault the nemesis injected, with the interval it was in force.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRecord {
    /// What was done (also used in messages).
    pub fault: Fault,
    /// When it began, from the start of the run.
    pub start: Duration,
    /// When it was healed, from the start of the run.
    pub end: Duration,
    /// Wall-clock time of `start` and `end`, to compare with database timestamps.
    pub wall: (SystemTime, SystemTime),
    /// Per node (for an id-service outage): when the node first refused a create for lack of
    /// IDs, from the start of the run.
    pub ran_dry: Vec<Option<Duration>>,
    /// When every node had recovered (served again), from the start of the run.
    pub recovered: Option<Duration>,
}

/// The faults the nemesis knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// `kill -9` of a shortener node, then a restart.
    KillNode(usize),
    /// `kill -9` of one id-service replica, then a restart.
    KillIdService(usize),
    /// Both id-service replicas down until every node ran out of IDs, then restarted.
    IdServiceOutage,
    /// PostgreSQL stopped abruptly under load, then restarted (crash recovery runs).
    PostgresCrash {
        /// `kill -9` of the postmaster instead of an immediate shutdown.
        kill: bool,
    },
    /// A node cut off from both id-service replicas through its proxies.
    CutNodeFromIdService {
        /// The node.
        node: usize,
        /// Reset or blackhole.
        blackhole: bool,
    },
    /// A node cut off from PostgreSQL through its proxy.
    CutNodeFromPostgres {
        /// The node.
        node: usize,
        /// Reset or blackhole.
        blackhole: bool,
    },
    /// A planned Patroni switchover from the leader to another member.
    Switchover,
    /// `kill -9` of the Patroni leader's agent and postmaster; the member is started again once
    /// another one leads.
    KillLeader,
    /// The Patroni leader cut off from etcd (a blackhole) until another member leads, then
    /// healed: it must demote itself.
    PartitionLeader,
    /// A Patroni replica killed (`kill -9`) and started again.
    RestartReplica,
}

/// The shared record of a run.
pub struct History {
    epoch: Instant,
    creates: Mutex<Vec<CreateOp>>,
    reads: Mutex<Vec<ReadOp>>,
    faults: Mutex<Vec<FaultRecord>>,
}

impl History {
    /// An empty history whose clock starts now.
    pub fn new() -> Self {
        Self {
            epoch: Instant::now(),
            creates: Mutex::new(Vec::new()),
            reads: Mutex::new(Vec::new()),
            faults: Mutex::new(Vec::new()),
        }
    }

    /// Time since the start of the run.
    pub fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// Records a create attempt.
    pub fn push_create(&self, op: CreateOp) {
        self.creates.lock().expect("history lock").push(op);
    }

    /// Records a read.
    pub fn push_read(&self, op: ReadOp) {
        self.reads.lock().expect("history lock").push(op);
    }

    /// Records a healed fault.
    pub fn push_fault(&self, fault: FaultRecord) {
        self.faults.lock().expect("history lock").push(fault);
    }

    /// A copy of every create attempt so far.
    pub fn creates(&self) -> Vec<CreateOp> {
        self.creates.lock().expect("history lock").clone()
    }

    /// A copy of every read so far.
    pub fn reads(&self) -> Vec<ReadOp> {
        self.reads.lock().expect("history lock").clone()
    }

    /// A copy of every fault so far.
    pub fn faults(&self) -> Vec<FaultRecord> {
        self.faults.lock().expect("history lock").clone()
    }
}

impl Default for History {
    fn default() -> Self {
        Self::new()
    }
}
