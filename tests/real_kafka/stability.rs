//! The consumer-stability and distributed-mode scenarios of the other
//! tests, on a real broker: static membership is real here, so restarts
//! move nothing, and the cluster creates its own topics.

use super::{broker, create_topic, group_history, unique};
use crate::consumer_stability::{restart_join_and_leave, slow_sink_pauses};
use crate::distributed::{Setting, three_workers};
use crate::fixtures::InProcess;

#[tokio::test(flavor = "multi_thread")]
async fn tasks_restart_join_and_leave_under_load_without_loss_or_duplicates() {
    let env = InProcess::start_on(&broker().bootstrap);
    let begun = |group: &str| group_history(broker(), group).1;
    restart_join_and_leave(env, &unique("stable"), Some(&begun)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_sink_pauses_the_consumer_instead_of_getting_it_evicted() {
    // The broker's group.min.session.timeout.ms is 6 s.
    let env = InProcess::start_on(&broker().bootstrap);
    slow_sink_pauses(env, &unique("slow"), 6).await;
}

/// On Apache Kafka this found a defect (2 of 8 runs): the assignment
/// callback read committed offsets, the read timed out five times in a row,
/// and the task wrote nothing for 50 s. The task now reads them itself,
/// outside the callback, with the new partitions paused meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn cluster_of_three_workers_shares_tasks_and_survives_a_sigkill() {
    let bootstrap = broker().bootstrap.clone();
    let prefix = unique("dist");
    create_topic(&bootstrap, &format!("{prefix}-orders"), 3).await;
    three_workers(Setting {
        bootstrap,
        prefix,
        embedded: None,
    })
    .await;
}
