//! A highly available PostgreSQL cluster for failover tests: one etcd and three PostgreSQL
//! members under Patroni (Debian's `etcd-server` and `patroni`), all on 127.0.0.1 on free
//! ports, stopped and deleted on drop.
//!
//! Applications reach the leader with [`Patroni::url`], a multi-host connection string with
//! `target_session_attrs=read-write`, as production does without a proxy. Each member talks to
//! etcd through its own [`Proxy`], so a test can cut one member (the leader) off from the
//! consensus store while it still serves clients.
//!
//! Faults: [`Patroni::switchover`] (planned, through Patroni's REST API), [`Patroni::kill`]
//! (`kill -9` of a member's Patroni and its postmaster), [`Patroni::set_etcd_link`] (a
//! partition from etcd) and [`Patroni::start_member`] (the member back, rejoining with
//! `pg_rewind` when it must). When the tests run as root, Patroni and PostgreSQL run as the
//! `postgres` user (`initdb` refuses root), as [`crate::cluster::Cluster`] does.

mod config;
pub mod router;
pub mod switchover;

pub use config::Replication;

use crate::cluster::{bin_dir, parse_id, process_alive, run_output};
use crate::proxy::{Mode, Proxy};
use config::{MemberPlan, member_yaml};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// How long the cluster may take to elect its first leader and stream to every replica.
const START_TIMEOUT: Duration = Duration::from_secs(90);

/// The leader key's TTL in seconds: Patroni promotes a replica this long after the leader
/// stops renewing it (a killed or partitioned leader).
pub const LEADER_TTL_SECS: u32 = 10;

struct Member {
    name: String,
    dir: PathBuf,
    pg_port: u16,
    rest: SocketAddr,
    etcd_link: Proxy,
    patroni: Option<Child>,
}

/// A running Patroni cluster.
pub struct Patroni {
    dir: tempfile::TempDir,
    owner: Option<(u32, u32)>,
    etcd: Child,
    members: Vec<Member>,
    replication: Replication,
    http: reqwest::Client,
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

impl Patroni {
    /// Starts etcd and three members replicating as `replication`, and waits until one is the
    /// leader and the other two stream from it.
    ///
    /// Panics with the logs when the cluster does not come up.
    pub async fn start(replication: Replication) -> Patroni {
        let dir = tempfile::Builder::new()
            .prefix("testkit-patroni-")
            .tempdir()
            .expect("create a directory for the cluster");
        let owner = if run_output("id", &["-u"]).await.trim() == "0" {
            Some((
                parse_id(&run_output("id", &["-u", "postgres"]).await),
                parse_id(&run_output("id", &["-g", "postgres"]).await),
            ))
        } else {
            None
        };
        let etcd_client = loopback(crate::free_port());
        let etcd = start_etcd(dir.path(), etcd_client).await;
        let mut cluster = Patroni {
            dir,
            owner,
            etcd,
            members: Vec::new(),
            replication,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(3))
                .build()
                .expect("build an HTTP client"),
        };
        for i in 0..3 {
            cluster.add_member(i, etcd_client).await;
        }
        // The first member bootstraps alone, so it is the leader the others copy.
        cluster.start_member(0);
        cluster.wait_leader(START_TIMEOUT).await;
        cluster.start_member(1);
        cluster.start_member(2);
        cluster.wait_replicas(2, START_TIMEOUT).await;
        cluster
    }

    async fn add_member(&mut self, i: usize, etcd: SocketAddr) {
        let name = format!("m{i}");
        let dir = self.dir.path().join(&name);
        std::fs::create_dir_all(&dir).expect("create a member directory");
        let member = Member {
            name,
            dir,
            pg_port: crate::free_port(),
            rest: loopback(crate::free_port()),
            etcd_link: Proxy::start(etcd).await.expect("start a proxy to etcd"),
            patroni: None,
        };
        let bin = bin_dir();
        let yaml = member_yaml(&MemberPlan {
            scope: "testkit",
            name: &member.name,
            dir: &member.dir,
            bin_dir: &bin,
            pg_port: member.pg_port,
            rest: member.rest,
            etcd: member.etcd_link.addr(),
            replication: self.replication,
            ttl: LEADER_TTL_SECS,
        });
        std::fs::write(member.dir.join("patroni.yml"), yaml).expect("write patroni.yml");
        self.give_to_postgres(&member.dir);
        self.members.push(member);
    }

    /// Hands a directory (and what is in it) to `postgres` when the tests run as root.
    fn give_to_postgres(&self, path: &Path) {
        if let Some((uid, gid)) = self.owner {
            for entry in [self.dir.path(), path]
                .into_iter()
                .map(Path::to_path_buf)
                .chain(
                    std::fs::read_dir(path)
                        .into_iter()
                        .flatten()
                        .flatten()
                        .map(|e| e.path()),
                )
            {
                std::os::unix::fs::chown(&entry, Some(uid), Some(gid))
                    .unwrap_or_else(|e| panic!("give {} to postgres: {e}", entry.display()));
            }
        }
    }

    /// How the cluster replicates.
    pub fn replication(&self) -> Replication {
        self.replication
    }

    /// How many members there are.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the cluster has no members (never, once started).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Member `i`'s name in Patroni (`m0`, `m1`, ...).
    pub fn name(&self, i: usize) -> &str {
        &self.members[i].name
    }

    /// Member `i`'s PostgreSQL port.
    pub fn pg_port(&self, i: usize) -> u16 {
        self.members[i].pg_port
    }

    /// A connection string for database `db` naming every member, with
    /// `target_session_attrs=read-write`: a client connects to whichever member is the primary.
    pub fn url(&self, db: &str) -> String {
        let hosts: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.pg_port))
            .collect();
        format!(
            "postgres://postgres@{}/{db}?target_session_attrs=read-write&connect_timeout=2",
            hosts.join(",")
        )
    }

    /// A connection string for database `db` on member `i` alone (a standby reads, no writes).
    pub fn member_url(&self, i: usize, db: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/{db}?connect_timeout=2",
            self.members[i].pg_port
        )
    }

    /// Creates database `name` on the leader (the replicas get it by streaming) and returns
    /// [`Patroni::url`] for it.
    pub async fn create_database(&self, name: &str) -> String {
        let client = connect(&self.url("postgres")).await;
        client
            .batch_execute(&format!("CREATE DATABASE \"{name}\""))
            .await
            .unwrap_or_else(|e| panic!("create database {name}: {e}"));
        self.url(name)
    }

    /// The member that answers Patroni's `/primary` check with 200 (it holds the leader key and
    /// runs as a primary), if one does.
    pub async fn leader(&self) -> Option<usize> {
        for (i, m) in self.members.iter().enumerate() {
            let url = format!("http://{}/primary", m.rest);
            if let Ok(r) = self.http.get(&url).send().await
                && r.status().is_success()
            {
                return Some(i);
            }
        }
        None
    }

    /// Waits until a member is the leader and returns it; panics with the logs after `timeout`.
    pub async fn wait_leader(&self, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(i) = self.leader().await {
                return i;
            }
            if Instant::now() >= deadline {
                panic!("no Patroni leader within {timeout:?}\n{}", self.logs());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until `count` members run as replicas of the leader with no lag (by the leader's
    /// `/cluster` view); panics with the logs after `timeout`.
    pub async fn wait_replicas(&self, count: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            if self.streaming_replicas().await >= count {
                return;
            }
            if Instant::now() >= deadline {
                panic!(
                    "{count} streaming replicas not seen within {timeout:?}\n{}",
                    self.logs()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// How many members stream from the leader with no lag; in the synchronous modes, zero
    /// until one of them is the synchronous standby (before that a switchover is refused).
    async fn streaming_replicas(&self) -> usize {
        let Some(leader) = self.leader().await else {
            return 0;
        };
        let url = format!("http://{}/cluster", self.members[leader].rest);
        let Ok(response) = self.http.get(&url).send().await else {
            return 0;
        };
        let Ok(view) = response.json::<serde_json::Value>().await else {
            return 0;
        };
        let members = view["members"].as_array().cloned().unwrap_or_default();
        let Some(timeline) = self.timeline(leader).await else {
            return 0;
        };
        let mut streaming: Vec<&str> = Vec::new();
        for m in &members {
            let state = m["state"].as_str().unwrap_or("");
            let role = m["role"].as_str().unwrap_or("");
            if !((state == "running" || state == "streaming") && m["lag"].as_u64() == Some(0))
                || !(role == "replica" || role == "sync_standby")
            {
                continue;
            }
            // Patroni's lag is 0 too for a replica that receives nothing yet (its replication
            // slot not made on a new leader): ask its WAL receiver.
            let Some(i) = self
                .members
                .iter()
                .position(|x| Some(x.name.as_str()) == m["name"].as_str())
            else {
                continue;
            };
            if self.receives_from_timeline(i, timeline).await {
                streaming.push(role);
            }
        }
        let synchronous = streaming.contains(&"sync_standby");
        if self.replication != Replication::Async && !synchronous {
            return 0;
        }
        streaming.len()
    }

    /// Whether member `i`'s WAL receiver streams on `timeline`.
    async fn receives_from_timeline(&self, i: usize, timeline: u64) -> bool {
        let Ok((client, connection)) =
            tokio_postgres::connect(&self.member_url(i, "postgres"), tokio_postgres::NoTls).await
        else {
            return false;
        };
        let connection = tokio::spawn(connection);
        let row = client
            .query_opt(
                "SELECT received_tli::bigint FROM pg_stat_wal_receiver WHERE status = 'streaming'",
                &[],
            )
            .await;
        connection.abort();
        matches!(row, Ok(Some(r)) if r.get::<_, i64>(0) as u64 == timeline)
    }

    /// The timeline member `i` runs on, as its Patroni reports it (`None` while it answers
    /// nothing or is not running).
    pub async fn timeline(&self, i: usize) -> Option<u64> {
        let url = format!("http://{}/patroni", self.members[i].rest);
        let answer = self.http.get(&url).send().await.ok()?;
        let view: serde_json::Value = answer.json().await.ok()?;
        view["timeline"].as_u64()
    }

    /// A planned switchover from the current leader to member `candidate` (or to any eligible
    /// member when `None`), through Patroni's REST API. Returns the old leader.
    pub async fn switchover(&self, candidate: Option<usize>) -> Result<usize, String> {
        let leader = self.leader().await.ok_or("no leader to switch over from")?;
        let mut body = serde_json::json!({ "leader": self.members[leader].name });
        if let Some(c) = candidate {
            body["candidate"] = serde_json::Value::from(self.members[c].name.clone());
        }
        let url = format!("http://{}/switchover", self.members[leader].rest);
        let response = reqwest::Client::new()
            .post(&url)
            .json(&body)
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .map_err(|e| format!("POST {url}: {e}"))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        if status.is_success() {
            Ok(leader)
        } else {
            Err(format!("switchover refused ({status}): {text}"))
        }
    }

    /// `kill -9` of member `i`'s Patroni and then its postmaster (the backends follow): the
    /// machine's power cut, as far as this member is concerned.
    pub async fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].patroni.take() {
            let _ = child.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
        }
        if let Some(pid) = self.postmaster_pid(i) {
            let _ = Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status()
                .await;
            let deadline = Instant::now() + Duration::from_secs(10);
            while process_alive(pid) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }

    /// Starts member `i`'s Patroni (again): it starts PostgreSQL and joins the cluster, as a
    /// replica when another member holds the leader key.
    pub fn start_member(&mut self, i: usize) {
        let member = &self.members[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(member.dir.join("patroni.log"))
            .expect("open the member's log");
        let config = member.dir.join("patroni.yml");
        let mut command = if self.owner.is_some() {
            let mut c = Command::new("setpriv");
            c.args([
                "--reuid=postgres",
                "--regid=postgres",
                "--init-groups",
                "--",
            ])
            .arg("patroni");
            c
        } else {
            Command::new("patroni")
        };
        command
            .arg(&config)
            .current_dir(&member.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log handle"))
            .stderr(log)
            .kill_on_drop(true);
        let child = command
            .spawn()
            .expect("start patroni (apt-get install patroni etcd-server; tests/prepare does)");
        self.members[i].patroni = Some(child);
    }

    /// Cuts member `i` off from etcd (or restores it with [`Mode::Open`]). A leader that
    /// cannot renew its key demotes itself; a replica cannot be promoted.
    pub fn set_etcd_link(&self, i: usize, mode: Mode) {
        self.members[i].etcd_link.set_mode(mode);
    }

    fn postmaster_pid(&self, i: usize) -> Option<u32> {
        let text = std::fs::read_to_string(self.members[i].dir.join("data/postmaster.pid")).ok()?;
        text.lines().next()?.trim().parse().ok()
    }

    /// The last lines of every member's Patroni log, for a failure message.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for m in &self.members {
            let text = std::fs::read_to_string(m.dir.join("patroni.log")).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(15)..];
            out.push_str(&format!("--- {} ---\n{}\n", m.name, tail.join("\n")));
        }
        out
    }
}

impl Patroni {
    /// Keeps the members' files and logs (and etcd's) after the cluster is dropped, for a run
    /// that failed without panicking, and returns their directory.
    pub fn keep_files(&mut self) -> PathBuf {
        let dir = std::mem::replace(
            &mut self.dir,
            tempfile::tempdir().expect("create a placeholder directory"),
        );
        dir.keep()
    }
}

impl Drop for Patroni {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            if let Some(mut child) = self.members[i].patroni.take() {
                let _ = child.start_kill();
            }
        }
        for i in 0..self.members.len() {
            if let Some(pid) = self.postmaster_pid(i) {
                let _ = std::process::Command::new("kill")
                    .args(["-9", &pid.to_string()])
                    .status();
            }
        }
        let _ = self.etcd.start_kill();
        if std::thread::panicking() {
            let dir = std::mem::replace(
                &mut self.dir,
                tempfile::tempdir().expect("create a placeholder directory"),
            );
            eprintln!(
                "Patroni cluster files kept for the failure: {}",
                dir.keep().display()
            );
        }
    }
}

async fn start_etcd(dir: &Path, client: SocketAddr) -> Child {
    let peer = loopback(crate::free_port());
    let log = std::fs::File::create(dir.join("etcd.log")).expect("create etcd.log");
    let child = Command::new("etcd")
        .args(["--name", "testkit", "--data-dir"])
        .arg(dir.join("etcd"))
        .args([
            &format!("--listen-client-urls=http://{client}"),
            &format!("--advertise-client-urls=http://{client}"),
            &format!("--listen-peer-urls=http://{peer}"),
            &format!("--initial-advertise-peer-urls=http://{peer}"),
            &format!("--initial-cluster=testkit=http://{peer}"),
        ])
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("clone the log handle"))
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("start etcd (apt-get install etcd-server; tests/prepare does)");
    // Listening is not enough: until its cluster version is decided etcd answers
    // `"etcdcluster": "not_decided"`, which Patroni cannot parse and dies of.
    let http = reqwest::Client::new();
    let ready = crate::wait_until(Duration::from_secs(30), || {
        let http = http.clone();
        async move {
            let Ok(answer) = http.get(format!("http://{client}/version")).send().await else {
                return false;
            };
            let version: serde_json::Value = answer.json().await.unwrap_or_default();
            version["etcdcluster"]
                .as_str()
                .is_some_and(|v| v.split('.').all(|n| n.parse::<u32>().is_ok()))
        }
    })
    .await;
    assert!(
        ready,
        "etcd did not decide its cluster version on {client}:\n{}",
        std::fs::read_to_string(dir.join("etcd.log")).unwrap_or_default()
    );
    child
}

async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("connect to the Patroni cluster at {url}: {e}"));
    tokio::spawn(connection);
    client
}
