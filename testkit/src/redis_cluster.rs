//! A Redis Cluster of the test's own on loopback: masters, each with a
//! replica, made by `redis-cli --cluster create`; each node keeps its
//! cluster configuration in its own temporary directory.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::redis_server::{Server, poll_until};

/// A running cluster; its nodes are stopped when it is dropped (each
/// [`Server`] stops itself).
pub struct Cluster {
    /// Every node, masters first as created (a master's replica is
    /// whichever `redis-cli` chose: ask [`Cluster::replica_of`]).
    pub nodes: Vec<Server>,
}

impl Cluster {
    /// `masters` masters with one replica each, every slot covered, the
    /// cluster's state `ok` on every node when this returns.
    pub fn start(masters: usize) -> Cluster {
        let nodes: Vec<Server> = (0..masters * 2)
            .map(|_| {
                // A port whose bus port (+ 10000) is free and valid.
                Server::with_args(vec![
                    "--cluster-enabled".into(),
                    "yes".into(),
                    // In the node's own directory, kept across restarts.
                    "--cluster-config-file".into(),
                    "nodes.conf".into(),
                    "--cluster-node-timeout".into(),
                    "2000".into(),
                ])
            })
            .collect();
        let cluster = Cluster { nodes };
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for node in &cluster.nodes {
            create.arg(format!("127.0.0.1:{}", node.port()));
        }
        let created = create
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli on PATH");
        assert!(
            created.status.success(),
            "redis-cli --cluster create failed ({}):\n{}{}",
            created.status,
            String::from_utf8_lossy(&created.stdout),
            String::from_utf8_lossy(&created.stderr)
        );
        cluster.wait_ok();
        // Every node knows every replica, and every replica is in sync.
        poll_until(
            "the replicas to be in sync",
            Duration::from_secs(60),
            || {
                cluster.nodes.iter().all(|n| {
                    n.command::<String>(&["CLUSTER", "NODES"])
                        .is_ok_and(|nodes| {
                            nodes.lines().filter(|l| l.contains("slave")).count() == masters
                        })
                        && (n.reports(&["INFO", "replication"], "role:master")
                            || n.reports(&["INFO", "replication"], "master_link_status:up"))
                })
            },
        );
        cluster
    }

    /// The URLs of every node, for `redis::cluster::ClusterClient`.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.url.clone()).collect()
    }

    /// Polls until every live node reports `cluster_state:ok`, with a
    /// deadline.
    pub fn wait_ok(&self) {
        poll_until("the cluster to be ok", Duration::from_secs(60), || {
            self.nodes
                .iter()
                .filter(|n| n.running())
                .all(|n| n.reports(&["CLUSTER", "INFO"], "cluster_state:ok"))
        });
    }

    /// The node id of `node`.
    pub fn id(&self, node: usize) -> String {
        self.nodes[node]
            .command::<String>(&["CLUSTER", "MYID"])
            .expect("CLUSTER MYID")
    }

    /// The index of the master serving `slot`, as `node` sees it.
    pub fn master_of_slot(&self, slot: u16) -> usize {
        let nodes: String = self.nodes[self.any_running()]
            .command(&["CLUSTER", "NODES"])
            .expect("CLUSTER NODES");
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if !fields[2].contains("master") || fields[2].contains("fail") {
                continue;
            }
            let serves = fields[8..].iter().any(|range| {
                let mut ends = range.split('-');
                match (ends.next().map(str::parse::<u16>), ends.next()) {
                    (Some(Ok(lo)), Some(hi)) => {
                        hi.parse().is_ok_and(|hi: u16| lo <= slot && slot <= hi)
                    }
                    (Some(Ok(one)), None) => one == slot,
                    _ => false,
                }
            });
            if serves {
                return self.index_of(fields[0]);
            }
        }
        panic!("no master serves slot {slot}");
    }

    /// The index of the replica of master `master`.
    pub fn replica_of(&self, master: usize) -> usize {
        let id = self.id(master);
        let nodes: String = self.nodes[self.any_running()]
            .command(&["CLUSTER", "NODES"])
            .expect("CLUSTER NODES");
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields[2].contains("slave") && fields[3] == id {
                return self.index_of(fields[0]);
            }
        }
        panic!("master {master} has no replica");
    }

    /// Moves `slot` from the master that serves it to master `to` the way
    /// `redis-cli --cluster reshard` does (IMPORTING/MIGRATING, `MIGRATE`
    /// a few keys at a time, then `SETSLOT NODE`), calling `between` after
    /// each batch so traffic runs while keys answer with ASK.
    pub fn migrate_slot(&self, slot: u16, to: usize, mut between: impl FnMut()) {
        let from = self.master_of_slot(slot);
        assert_ne!(from, to, "slot {slot} is already on node {to}");
        let (from_id, to_id) = (self.id(from), self.id(to));
        let slot_s = slot.to_string();
        let ok = |r: redis::RedisResult<String>| r.expect("CLUSTER SETSLOT");
        ok(self.nodes[to].command(&["CLUSTER", "SETSLOT", &slot_s, "IMPORTING", &from_id]));
        ok(self.nodes[from].command(&["CLUSTER", "SETSLOT", &slot_s, "MIGRATING", &to_id]));
        let to_port = self.nodes[to].port().to_string();
        loop {
            let keys: Vec<String> = self.nodes[from]
                .command(&["CLUSTER", "GETKEYSINSLOT", &slot_s, "5"])
                .expect("GETKEYSINSLOT");
            if keys.is_empty() {
                break;
            }
            let mut migrate = vec!["MIGRATE", "127.0.0.1", &to_port, "", "0", "5000", "KEYS"];
            migrate.extend(keys.iter().map(String::as_str));
            let _: String = self.nodes[from].command(&migrate).expect("MIGRATE");
            between();
        }
        for node in [to, from] {
            ok(self.nodes[node].command(&["CLUSTER", "SETSLOT", &slot_s, "NODE", &to_id]));
        }
        for (i, node) in self.nodes.iter().enumerate() {
            if i != to && i != from && node.running() {
                let _ = node.command::<String>(&["CLUSTER", "SETSLOT", &slot_s, "NODE", &to_id]);
            }
        }
    }

    /// A manual failover: the replica of master `master` takes over (it
    /// first catches up with the master, so nothing acknowledged is lost);
    /// returns the new master's index once the cluster is ok again.
    pub fn failover(&self, master: usize) -> usize {
        let replica = self.replica_of(master);
        let _: String = self.nodes[replica]
            .command(&["CLUSTER", "FAILOVER"])
            .expect("CLUSTER FAILOVER");
        self.nodes[replica].wait_for("role:master");
        // Every node has seen the switch: the old master is a replica now.
        let old = self.id(master);
        poll_until("the failover to spread", Duration::from_secs(30), || {
            self.nodes.iter().filter(|n| n.running()).all(|n| {
                n.command::<String>(&["CLUSTER", "NODES"])
                    .is_ok_and(|nodes| {
                        nodes
                            .lines()
                            .any(|l| l.starts_with(old.as_str()) && l.contains("slave"))
                    })
            })
        });
        self.wait_ok();
        replica
    }

    /// Kills master `master` outright (SIGKILL: whatever it had not yet
    /// sent its replica is gone) and waits for the cluster to promote the
    /// replica by itself, after the node timeout; returns the new master's
    /// index once every live node sees the cluster ok again.
    pub fn crash(&mut self, master: usize) -> usize {
        let replica = self.replica_of(master);
        self.nodes[master].stop();
        self.nodes[replica].wait_for("role:master");
        self.wait_ok();
        replica
    }

    /// Starts a stopped node again on its port, empty but with its cluster
    /// configuration: the cluster takes it back, as a replica of whichever
    /// master now serves its old slots. Returns once it is in sync.
    pub fn rejoin(&mut self, node: usize) {
        self.nodes[node].restart();
        self.nodes[node].wait_for("master_link_status:up");
        self.wait_ok();
    }

    fn index_of(&self, id: &str) -> usize {
        (0..self.nodes.len())
            .find(|&i| self.nodes[i].running() && self.id(i) == id)
            .unwrap_or_else(|| panic!("no node {id}"))
    }

    /// The index of a node whose process runs.
    pub fn any_running(&self) -> usize {
        (0..self.nodes.len())
            .find(|&i| self.nodes[i].running())
            .expect("a running node")
    }
}
