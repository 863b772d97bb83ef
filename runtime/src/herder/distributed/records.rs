//! The records of the config and status topics, and where new tasks are
//! placed among the task slots.

use std::collections::BTreeMap;

use crate::task::State;

/// A config topic key. Values are JSON; a tombstone (no value) deletes.
#[derive(Debug, PartialEq, Eq)]
pub enum ConfigKey<'a> {
    /// `connector-<name>`: `{"properties": {...}, "slots": [..]}`.
    Connector(&'a str),
    /// `target-state-<name>`: `{"state": "RUNNING" | "PAUSED" | "STOPPED"}`.
    TargetState(&'a str),
    /// `restart-connector-<name>`: `{"include-tasks", "only-failed", "task"?}`.
    Restart(&'a str),
}

pub fn connector_key(name: &str) -> String {
    format!("connector-{name}")
}

pub fn target_state_key(name: &str) -> String {
    format!("target-state-{name}")
}

pub fn restart_key(name: &str) -> String {
    format!("restart-connector-{name}")
}

pub fn parse_config_key(key: &str) -> Option<ConfigKey<'_>> {
    if let Some(name) = key.strip_prefix("connector-") {
        Some(ConfigKey::Connector(name))
    } else if let Some(name) = key.strip_prefix("target-state-") {
        Some(ConfigKey::TargetState(name))
    } else {
        key.strip_prefix("restart-connector-")
            .map(ConfigKey::Restart)
    }
}

/// A status topic key.
#[derive(Debug, PartialEq, Eq)]
pub enum StatusKey<'a> {
    /// `status-task-<connector>-<id>`: `{"state", "trace"?, "worker_id"}`.
    Task(&'a str, u32),
    /// `worker-<id>`: `{"slots": [..]}`, the task slots the worker holds.
    Worker(&'a str),
    /// `topic-<topic>-connector-<connector>` (Kafka Connect's key): a topic
    /// the connector has used, `{"topic": {"name", "connector", "task",
    /// "discoverTimestamp"}}`, until its topics are reset.
    Topic { topic: &'a str, connector: &'a str },
}

pub fn task_status_key(connector: &str, task: u32) -> String {
    format!("status-task-{connector}-{task}")
}

pub fn worker_key(worker: &str) -> String {
    format!("worker-{worker}")
}

pub fn topic_status_key(topic: &str, connector: &str) -> String {
    format!("topic-{topic}-connector-{connector}")
}

pub fn parse_status_key(key: &str) -> Option<StatusKey<'_>> {
    if let Some(rest) = key.strip_prefix("topic-") {
        // Kafka topic names have no `-connector-` of their own only by
        // convention; as Kafka Connect does, the first one separates.
        let (topic, connector) = rest.split_once("-connector-")?;
        return Some(StatusKey::Topic { topic, connector });
    }
    if let Some(rest) = key.strip_prefix("status-task-") {
        let (connector, id) = rest.rsplit_once('-')?;
        return Some(StatusKey::Task(connector, id.parse().ok()?));
    }
    key.strip_prefix("worker-").map(StatusKey::Worker)
}

pub fn parse_state(s: &str) -> Option<State> {
    State::ALL.into_iter().find(|state| state.as_str() == s)
}

/// The slot of a task no placement names (a record written by an older or
/// other tool): a stable hash, the same on every worker.
pub fn fallback_slot(connector: &str, task: u32, slot_count: u32) -> u32 {
    // FNV-1a: stable across builds and platforms, unlike std's hasher.
    let mut hash: u64 = 0xcbf29ce484222325;
    for byte in connector.bytes().chain(task.to_be_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x100000001b3);
    }
    (hash % u64::from(slot_count.max(1))) as u32
}

/// Chooses a slot for each of a connector's `tasks`. Kafka's coordinator
/// decides which worker holds which slot; this only decides which slots the
/// tasks go in, so that they land on the least loaded workers as the
/// cluster stands (`slot_owners`, from the workers' published slots):
/// each task goes to the worker with the fewest tasks, in the least used of
/// its slots. `keep` (the connector's current placement) is kept, so an
/// update moves nothing; `others` are the slots other connectors' tasks use.
pub fn place(
    tasks: u32,
    slot_count: u32,
    slot_owners: &BTreeMap<u32, String>,
    others: impl IntoIterator<Item = u32>,
    keep: &[u32],
) -> Vec<u32> {
    let slot_count = slot_count.max(1);
    let mut used: BTreeMap<u32, usize> = BTreeMap::new();
    let mut load: BTreeMap<&str, usize> = slot_owners.values().map(|w| (w.as_str(), 0)).collect();
    for slot in others {
        take(slot, slot_owners, &mut used, &mut load);
    }
    let mut placed: Vec<u32> = keep
        .iter()
        .copied()
        .filter(|s| *s < slot_count)
        .take(tasks as usize)
        .collect();
    for slot in &placed {
        take(*slot, slot_owners, &mut used, &mut load);
    }
    while placed.len() < tasks as usize {
        let least_used = |candidates: &mut dyn Iterator<Item = u32>| {
            candidates.min_by_key(|s| (used.get(s).copied().unwrap_or(0), *s))
        };
        let lightest = load
            .iter()
            .min_by_key(|(w, n)| (**n, **w))
            .map(|(w, _)| w.to_string());
        let slot = lightest
            .and_then(|w| {
                least_used(
                    &mut slot_owners
                        .iter()
                        .filter(|(s, owner)| **owner == w && **s < slot_count)
                        .map(|(s, _)| *s),
                )
            })
            .or_else(|| least_used(&mut (0..slot_count)))
            .expect("at least one slot");
        take(slot, slot_owners, &mut used, &mut load);
        placed.push(slot);
    }
    placed
}

/// Moves tasks between slots until no worker runs more than one task more
/// than another (slots stay where Kafka's coordinator put them; tasks
/// change slots). `placements` are each connector's slots, one per running
/// task; the answer holds the connectors whose placement changed. Tasks in
/// slots no worker has claimed yet are left alone.
pub fn rebalance(
    placements: &BTreeMap<String, Vec<u32>>,
    slot_owners: &BTreeMap<u32, String>,
) -> BTreeMap<String, Vec<u32>> {
    let mut load: BTreeMap<&str, Vec<(String, usize)>> = slot_owners
        .values()
        .map(|w| (w.as_str(), Vec::new()))
        .collect();
    let mut used: BTreeMap<u32, usize> = BTreeMap::new();
    for (connector, slots) in placements {
        for (task, slot) in slots.iter().enumerate() {
            *used.entry(*slot).or_default() += 1;
            if let Some(w) = slot_owners.get(slot) {
                load.entry(w.as_str())
                    .or_default()
                    .push((connector.clone(), task));
            }
        }
    }
    let mut out: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    let total: usize = load.values().map(Vec::len).sum();
    for _ in 0..total {
        let Some((busiest, most)) = load
            .iter()
            .max_by_key(|(w, t)| (t.len(), std::cmp::Reverse(**w)))
            .map(|(w, t)| (w.to_string(), t.len()))
        else {
            break;
        };
        let Some((idlest, least)) = load
            .iter()
            .min_by_key(|(w, t)| (t.len(), **w))
            .map(|(w, t)| (w.to_string(), t.len()))
        else {
            break;
        };
        if most <= least + 1 {
            break;
        }
        let Some(slot) = slot_owners
            .iter()
            .filter(|(_, w)| **w == idlest)
            .map(|(s, _)| *s)
            .min_by_key(|s| (used.get(s).copied().unwrap_or(0), *s))
        else {
            break;
        };
        let (connector, task) = load
            .get_mut(busiest.as_str())
            .and_then(Vec::pop)
            .expect("the busiest worker has tasks");
        let slots = out
            .entry(connector.clone())
            .or_insert_with(|| placements[&connector].clone());
        if let Some(old) = used.get_mut(&slots[task]) {
            *old -= 1;
        }
        slots[task] = slot;
        *used.entry(slot).or_default() += 1;
        load.get_mut(idlest.as_str())
            .expect("the idlest worker is known")
            .push((connector, task));
    }
    out
}

/// Counts a task in `slot`, and for the worker holding it.
fn take<'a>(
    slot: u32,
    slot_owners: &'a BTreeMap<u32, String>,
    used: &mut BTreeMap<u32, usize>,
    load: &mut BTreeMap<&'a str, usize>,
) {
    *used.entry(slot).or_default() += 1;
    if let Some(w) = slot_owners.get(&slot) {
        *load.entry(w.as_str()).or_default() += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owners(layout: &[(&str, std::ops::Range<u32>)]) -> BTreeMap<u32, String> {
        layout
            .iter()
            .flat_map(|(w, r)| r.clone().map(move |s| (s, w.to_string())))
            .collect()
    }

    fn workers_of(slots: &[u32], owners: &BTreeMap<u32, String>) -> Vec<String> {
        slots.iter().map(|s| owners[s].clone()).collect()
    }

    #[test]
    fn tasks_spread_over_workers_whatever_slots_they_hold() {
        // Contiguous ranges, as the sticky assignor leaves after staggered joins.
        let o = owners(&[("a", 0..8), ("b", 8..16), ("c", 16..24)]);
        let first = place(3, 24, &o, [], &[]);
        let mut w = workers_of(&first, &o);
        w.sort();
        assert_eq!(w, ["a", "b", "c"]);
        // A second connector goes on spreading, counting the first's tasks.
        let second = place(3, 24, &o, first.clone(), &[]);
        let mut w = workers_of(&second, &o);
        w.sort();
        assert_eq!(w, ["a", "b", "c"]);
        assert!(
            second.iter().all(|s| !first.contains(s)),
            "free slots first"
        );
    }

    #[test]
    fn an_update_keeps_the_placement_and_grows_or_shrinks_it() {
        let o = owners(&[("a", 0..4), ("b", 4..8)]);
        assert_eq!(place(2, 8, &o, [], &[5, 1]), vec![5, 1]);
        assert_eq!(place(1, 8, &o, [], &[5, 1]), vec![5]);
        let grown = place(3, 8, &o, [], &[5, 1]);
        assert_eq!(&grown[..2], &[5, 1]);
    }

    #[test]
    fn without_known_owners_the_least_used_slots_are_taken() {
        let none = BTreeMap::new();
        assert_eq!(place(3, 8, &none, [0, 1], &[]), vec![2, 3, 4]);
        assert_eq!(place(2, 2, &none, [0, 1], &[]), vec![0, 1]);
    }

    #[test]
    fn a_worker_that_joins_late_gets_its_share_of_tasks() {
        // Six tasks placed while only a and b held slots; c now holds some.
        let o = owners(&[("a", 0..4), ("b", 4..8), ("c", 8..12)]);
        let placements: BTreeMap<String, Vec<u32>> = [
            ("x".to_string(), vec![0, 4, 1]),
            ("y".to_string(), vec![5, 2, 6]),
        ]
        .into();
        let moved = rebalance(&placements, &o);
        let mut after = placements.clone();
        after.extend(moved.clone());
        let mut per_worker: BTreeMap<String, usize> = BTreeMap::new();
        for s in after.values().flatten() {
            *per_worker.entry(o[s].clone()).or_default() += 1;
        }
        assert_eq!(per_worker.values().copied().collect::<Vec<_>>(), [2, 2, 2]);
        let changed: usize = moved
            .iter()
            .map(|(c, s)| s.iter().zip(&placements[c]).filter(|(a, b)| a != b).count())
            .sum();
        assert_eq!(changed, 2, "only what is needed moves: {moved:?}");
        // Balanced already: nothing moves.
        assert!(rebalance(&after, &o).is_empty());
    }

    #[test]
    fn keys_round_trip() {
        assert_eq!(
            parse_config_key(&connector_key("a-b")),
            Some(ConfigKey::Connector("a-b"))
        );
        assert_eq!(
            parse_config_key(&target_state_key("x")),
            Some(ConfigKey::TargetState("x"))
        );
        assert_eq!(
            parse_config_key(&restart_key("x")),
            Some(ConfigKey::Restart("x"))
        );
        assert_eq!(parse_config_key("session-key"), None);
        assert_eq!(
            parse_status_key(&task_status_key("orders-sink", 12)),
            Some(StatusKey::Task("orders-sink", 12))
        );
        assert_eq!(
            parse_status_key(&worker_key("10.0.0.1:8083")),
            Some(StatusKey::Worker("10.0.0.1:8083"))
        );
        assert_eq!(parse_status_key("status-task-nonumber"), None);
        assert_eq!(
            parse_status_key(&topic_status_key("shop.orders-v2", "orders-sink")),
            Some(StatusKey::Topic {
                topic: "shop.orders-v2",
                connector: "orders-sink"
            })
        );
        assert_eq!(parse_status_key("topic-no-separator"), None);
        assert_eq!(parse_state("PAUSED"), Some(State::Paused));
    }

    #[test]
    fn fallback_slots_are_stable_and_in_range() {
        let a = fallback_slot("orders", 3, 64);
        assert_eq!(a, fallback_slot("orders", 3, 64));
        assert!(a < 64);
    }
}
