//! The topics each connector has used (`GET /connectors/{name}/topics`),
//! kept apart from the running connector: a config update, a restart or a
//! stop keeps them, as Kafka Connect's status store does; a reset or the
//! connector's deletion forgets them.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

/// One connector's topics, shared with its tasks, which add to it.
pub type TopicSet = Arc<Mutex<BTreeSet<String>>>;

#[derive(Default)]
pub struct ActiveTopics {
    by_connector: Mutex<HashMap<String, TopicSet>>,
}

impl ActiveTopics {
    /// The connector's set, made empty if it has none yet.
    pub fn of(&self, connector: &str) -> TopicSet {
        self.by_connector
            .lock()
            .expect("topics lock")
            .entry(connector.to_string())
            .or_default()
            .clone()
    }

    pub fn list(&self, connector: &str) -> Vec<String> {
        self.by_connector
            .lock()
            .expect("topics lock")
            .get(connector)
            .map(|s| s.lock().expect("topics lock").iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Every (connector, topic) pair.
    pub fn all(&self) -> Vec<(String, String)> {
        let by_connector = self.by_connector.lock().expect("topics lock");
        by_connector
            .iter()
            .flat_map(|(c, s)| {
                s.lock()
                    .expect("topics lock")
                    .iter()
                    .map(|t| (c.clone(), t.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Forgets one topic: the connector's tasks add it again when they next
    /// use it.
    pub fn forget(&self, connector: &str, topic: &str) {
        if let Some(s) = self
            .by_connector
            .lock()
            .expect("topics lock")
            .get(connector)
        {
            s.lock().expect("topics lock").remove(topic);
        }
    }

    /// `PUT /connectors/{name}/topics/reset`.
    pub fn clear(&self, connector: &str) {
        if let Some(s) = self
            .by_connector
            .lock()
            .expect("topics lock")
            .get(connector)
        {
            s.lock().expect("topics lock").clear();
        }
    }

    /// The connector was deleted. Its running tasks (if any are still
    /// stopping) keep the set they hold; a new connector of the same name
    /// starts with none.
    pub fn remove(&self, connector: &str) {
        self.by_connector
            .lock()
            .expect("topics lock")
            .remove(connector);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connectors_topics_outlive_its_tasks_until_reset_or_deleted() {
        let topics = ActiveTopics::default();
        topics.of("c").lock().unwrap().insert("t1".into());
        // A restart's tasks get the same set.
        let again = topics.of("c");
        again.lock().unwrap().insert("t2".into());
        assert_eq!(topics.list("c"), ["t1", "t2"]);
        assert_eq!(
            topics.all(),
            [
                ("c".to_string(), "t1".to_string()),
                ("c".into(), "t2".into())
            ]
        );
        topics.forget("c", "t1");
        assert_eq!(topics.list("c"), ["t2"]);
        topics.clear("c");
        assert!(topics.list("c").is_empty());
        // The tasks' set is the one cleared: they add what they use next.
        again.lock().unwrap().insert("t3".into());
        assert_eq!(topics.list("c"), ["t3"]);
        topics.remove("c");
        assert!(topics.list("c").is_empty());
        assert!(topics.of("c").lock().unwrap().is_empty());
    }
}
