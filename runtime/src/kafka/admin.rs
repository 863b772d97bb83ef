//! Admin and group operations: topics created when missing, a group's
//! committed offsets read, and changed through the Admin API
//! (AlterConsumerGroupOffsets, DeleteConsumerGroupOffsets, which
//! rust-rdkafka does not wrap: called through librdkafka here).

use std::collections::BTreeMap;
use std::ffi::{CStr, CString, c_char, c_int};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::bindings as rd;
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaResult, RDKafkaErrorCode};
use rdkafka::{Offset, TopicPartitionList};

use super::KafkaClients;

/// How long one Admin request for a group's offsets may take.
const GROUP_OFFSETS_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a change asks again while the group still has members.
const GROUP_MEMBERS_POLL: Duration = Duration::from_secs(1);

/// Why a consumer group's offsets could not be changed.
#[derive(Debug, thiserror::Error)]
pub enum GroupOffsetsError {
    /// The broker does not implement the request (OffsetDelete needs Kafka
    /// 2.4; librdkafka's mock cluster has none).
    #[error("the broker does not support {api}: {message}")]
    Unsupported { api: &'static str, message: String },
    /// Members are in the group: only they may commit, and nobody may
    /// delete offsets of topics they are subscribed to.
    #[error(
        "consumer group `{group}` still has members ({code}): a task of the connector has not stopped, or its session has not timed out yet; retry once it has"
    )]
    GroupActive {
        group: String,
        code: RDKafkaErrorCode,
    },
    /// The broker refused one partition (e.g. it does not exist).
    #[error("topic `{topic}` partition {partition}: {code}")]
    Partition {
        topic: String,
        partition: i32,
        code: RDKafkaErrorCode,
    },
    #[error("{api} got no answer within {}s", timeout.as_secs())]
    Timeout {
        api: &'static str,
        timeout: Duration,
    },
    #[error("{api} failed: {message}")]
    Failed {
        api: &'static str,
        code: RDKafkaErrorCode,
        message: String,
    },
    /// The way for brokers without the Admin request: committing as a
    /// member of the group.
    #[error(
        "the broker does not support {api}, and committing as a group member failed: {message}"
    )]
    Fallback { api: &'static str, message: String },
}

/// The two Admin requests that change a group's committed offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GroupOffsetsOp {
    Alter,
    Delete,
}

impl GroupOffsetsOp {
    fn api(self) -> &'static str {
        match self {
            Self::Alter => "AlterConsumerGroupOffsets",
            Self::Delete => "DeleteConsumerGroupOffsets",
        }
    }

    /// What an error code, for the whole request or one partition, means.
    fn error(
        self,
        group: &str,
        code: RDKafkaErrorCode,
        message: String,
        partition: Option<(String, i32)>,
    ) -> GroupOffsetsError {
        use RDKafkaErrorCode as E;
        let api = self.api();
        match code {
            E::UnsupportedFeature | E::UnsupportedVersion => {
                GroupOffsetsError::Unsupported { api, message }
            }
            E::UnknownMemberId
            | E::IllegalGeneration
            | E::StaleMemberEpoch
            | E::FencedInstanceId
            | E::RebalanceInProgress
            | E::GroupSubscribedToTopic
            | E::NonEmptyGroup => GroupOffsetsError::GroupActive {
                group: group.to_string(),
                code,
            },
            E::OperationTimedOut | E::RequestTimedOut => GroupOffsetsError::Timeout {
                api,
                timeout: GROUP_OFFSETS_TIMEOUT,
            },
            _ => match partition {
                Some((topic, partition)) => GroupOffsetsError::Partition {
                    topic,
                    partition,
                    code,
                },
                None => GroupOffsetsError::Failed { api, code, message },
            },
        }
    }
}

impl KafkaClients {
    /// The partitions of each of `topics` (none for a topic that does not
    /// exist). Blocking.
    pub fn partitions(&self, topics: &[String]) -> anyhow::Result<BTreeMap<String, Vec<i32>>> {
        let consumer = self.tool_consumer("sluice-metadata")?;
        partitions_of(&consumer, topics)
    }

    /// The cluster's topics whose whole name matches `pattern` (a sink's
    /// `topics.regex`), internal ones (`__...`) left out. Blocking.
    pub fn topics_matching(&self, pattern: &str) -> anyhow::Result<Vec<String>> {
        let whole = regex::Regex::new(&format!("^(?:{pattern})$"))?;
        let consumer = self.tool_consumer("sluice-metadata")?;
        let metadata = consumer.fetch_metadata(None, Duration::from_secs(10))?;
        let mut topics: Vec<String> = metadata
            .topics()
            .iter()
            .map(|t| t.name().to_string())
            .filter(|t| !t.starts_with("__") && whole.is_match(t))
            .collect();
        topics.sort();
        Ok(topics)
    }

    /// A consumer group's committed offset for every partition of `topics`
    /// (None: nothing committed). Blocking.
    pub fn group_offsets(
        &self,
        group: &str,
        topics: &[String],
    ) -> anyhow::Result<Vec<(String, i32, Option<i64>)>> {
        let consumer = self.tool_consumer(group)?;
        let mut tpl = TopicPartitionList::new();
        for (topic, partitions) in partitions_of(&consumer, topics)? {
            for p in partitions {
                tpl.add_partition(&topic, p);
            }
        }
        let committed = consumer.committed_offsets(tpl, Duration::from_secs(10))?;
        Ok(committed
            .elements()
            .iter()
            .map(|e| {
                let offset = match e.offset() {
                    Offset::Offset(o) => Some(o),
                    _ => None,
                };
                (e.topic().to_string(), e.partition(), offset)
            })
            .collect())
    }

    /// Changes a stopped connector's consumer group offsets as Kafka Connect
    /// does, through the Admin API: `Some` offsets are committed
    /// (AlterConsumerGroupOffsets), `None` ones deleted
    /// (DeleteConsumerGroupOffsets), so that the partition starts where
    /// `auto.offset.reset` says. Both need a group without members: members
    /// still in it are waited for up to a session timeout (see
    /// [`Self::group_members_patience`]). Deleting needs OffsetDelete
    /// (KIP-496, Kafka 2.4 or later). A broker that does not support a
    /// request gets the offsets committed by a member instead (see
    /// [`Self::commit_as_member`]), and so does the embedded broker, which
    /// has no OffsetDelete and takes commits only from members. Blocking.
    pub fn change_group_offsets(
        &self,
        group: &str,
        changes: &[(String, i32, Option<i64>)],
    ) -> Result<(), GroupOffsetsError> {
        if changes.is_empty() {
            return Ok(());
        }
        let admin = self.admin().map_err(|e| GroupOffsetsError::Failed {
            api: "the Admin API",
            code: RDKafkaErrorCode::Fail,
            message: format!("creating an admin client: {e}"),
        })?;
        let (set, delete): (Vec<_>, Vec<_>) = changes
            .iter()
            .cloned()
            .partition(|(_, _, offset)| offset.is_some());
        for (op, changes) in [
            (GroupOffsetsOp::Alter, set),
            (GroupOffsetsOp::Delete, delete),
        ] {
            if !changes.is_empty() {
                self.change_group_offsets_with(&admin, op, group, &changes)?;
            }
        }
        Ok(())
    }

    /// How long a change waits for members to leave the group: a stopped
    /// task's consumer is a static member (`group.instance.id`), which the
    /// broker keeps until its session times out unless it left, so a change
    /// right after a stop may wait for that.
    fn group_members_patience(&self) -> Duration {
        let session_ms = self
            .consumer_overrides
            .iter()
            .rev()
            .find(|(k, _)| k == "session.timeout.ms")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(super::SESSION_TIMEOUT_MS);
        Duration::from_millis(session_ms) + Duration::from_secs(10)
    }

    fn change_group_offsets_with(
        &self,
        admin: &AdminClient<DefaultClientContext>,
        op: GroupOffsetsOp,
        group: &str,
        changes: &[(String, i32, Option<i64>)],
    ) -> Result<(), GroupOffsetsError> {
        let mut tpl = TopicPartitionList::new();
        for (topic, partition, offset) in changes {
            match offset {
                Some(offset) => tpl
                    .add_partition_offset(topic, *partition, Offset::Offset(*offset))
                    .map_err(|e| GroupOffsetsError::Failed {
                        api: op.api(),
                        code: RDKafkaErrorCode::InvalidArgument,
                        message: format!("{topic} partition {partition}: {e}"),
                    })?,
                None => {
                    tpl.add_partition(topic, *partition);
                }
            }
        }
        // librdkafka's mock cluster (the embedded broker) has no
        // OffsetDelete, and it must not be asked: librdkafka 2.12 refuses a
        // group coordinator request the broker lacks before sending it, and
        // on that path releases the request's reply queue twice, which
        // aborts the process (the `rd_kafka_q_destroy0` refcount assertion)
        // when the client is destroyed.
        if op == GroupOffsetsOp::Delete && self.is_embedded() {
            return self.commit_as_member_instead(op, group, changes, "it has no OffsetDelete");
        }
        let started = Instant::now();
        let mut waited = false;
        loop {
            let unsupported = match admin_group_offsets(admin, op, group, &tpl) {
                Ok(()) => return Ok(()),
                // No group: no offsets to delete.
                Err(GroupOffsetsError::Failed {
                    code: RDKafkaErrorCode::GroupIdNotFound,
                    ..
                }) if op == GroupOffsetsOp::Delete => return Ok(()),
                Err(GroupOffsetsError::Unsupported { message, .. }) => message,
                // The mock cluster keeps every group it has seen, members or
                // not, and takes a commit into one only from a member: it
                // answers an admin commit UNKNOWN_MEMBER_ID even in an empty
                // group, where Kafka takes it. From it, that answer means
                // "unsupported".
                Err(GroupOffsetsError::GroupActive {
                    code: RDKafkaErrorCode::UnknownMemberId,
                    ..
                }) if op == GroupOffsetsOp::Alter && self.is_embedded() => {
                    "it takes commits only from group members".into()
                }
                Err(GroupOffsetsError::GroupActive { code, .. })
                    if started.elapsed() < self.group_members_patience() =>
                {
                    if !waited {
                        tracing::info!(group, api = op.api(), %code, "the consumer group still has members; waiting for them to leave or time out");
                        waited = true;
                    }
                    std::thread::sleep(GROUP_MEMBERS_POLL);
                    continue;
                }
                Err(e) => return Err(e),
            };
            return self.commit_as_member_instead(op, group, changes, &unsupported);
        }
    }

    /// [`Self::commit_as_member`], for a broker that does not support `op`
    /// (`why`).
    fn commit_as_member_instead(
        &self,
        op: GroupOffsetsOp,
        group: &str,
        changes: &[(String, i32, Option<i64>)],
        why: &str,
    ) -> Result<(), GroupOffsetsError> {
        tracing::info!(
            group,
            api = op.api(),
            reason = why,
            "the broker does not support the Admin request; committing as a group member"
        );
        self.commit_as_member(group, changes)
            .map_err(|e| GroupOffsetsError::Fallback {
                api: op.api(),
                message: format!("{e:#}"),
            })
    }

    /// Commits offsets for a stopped connector's group as a member, for
    /// brokers without the Admin requests (librdkafka's mock cluster). It
    /// joins the group (with the sinks' protocol), waits until it owns
    /// every partition (no task competes while the connector is stopped),
    /// commits, and leaves. `None` means the beginning of the partition: a
    /// member cannot delete an offset. Blocking.
    fn commit_as_member(
        &self,
        group: &str,
        offsets: &[(String, i32, Option<i64>)],
    ) -> anyhow::Result<()> {
        use rdkafka::consumer::CommitMode;
        if offsets.is_empty() {
            return Ok(());
        }
        let consumer: BaseConsumer = self
            .group_consumer_config(
                group,
                &[
                    ("partition.assignment.strategy", "cooperative-sticky"),
                    ("auto.offset.reset", "earliest"),
                ],
            )
            .create()?;
        // A partition that does not exist would never be assigned: said at
        // once rather than after the wait below.
        let mut topics: Vec<String> = offsets.iter().map(|(t, _, _)| t.clone()).collect();
        topics.sort_unstable();
        topics.dedup();
        let existing = partitions_of(&consumer, &topics)?;
        if let Some((topic, partition, _)) = offsets
            .iter()
            .find(|(t, p, _)| !existing.get(t).is_some_and(|ps| ps.contains(p)))
        {
            anyhow::bail!("topic `{topic}` has no partition {partition}");
        }
        let mut tpl = TopicPartitionList::new();
        for (topic, partition, offset) in offsets {
            let at = match offset {
                Some(o) => *o,
                None => {
                    consumer
                        .fetch_watermarks(topic, *partition, Duration::from_secs(10))?
                        .0
                }
            };
            tpl.add_partition_offset(topic, *partition, Offset::Offset(at))?;
        }
        let topics: Vec<&str> = topics.iter().map(String::as_str).collect();
        consumer.subscribe(&topics)?;
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            // Serve the group protocol; records read here are not used or
            // committed.
            let _ = consumer.poll(Duration::from_millis(200));
            let owned = consumer.assignment()?;
            let all = offsets.iter().all(|(t, p, _)| {
                owned
                    .elements()
                    .iter()
                    .any(|e| e.topic() == t && e.partition() == *p)
            });
            if all {
                break;
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "could not take over the partitions of group `{group}`: is a task of the connector still running?"
                );
            }
        }
        consumer
            .commit(&tpl, CommitMode::Sync)
            .map_err(|e| anyhow::anyhow!("the consumer group did not accept the offsets: {e}"))?;
        consumer.unsubscribe();
        Ok(())
    }

    /// Creates a worker's internal topic if it is missing; `compact` ones
    /// keep the latest record of every key forever (`cleanup.policy=compact`),
    /// as Kafka Connect's config and status topics do. Returns its partition
    /// count.
    pub async fn ensure_internal_topic(
        &self,
        topic: &str,
        partitions: i32,
        replication: i32,
        compact: bool,
    ) -> anyhow::Result<i32> {
        let count = |clients: &Self| -> anyhow::Result<Option<i32>> {
            let consumer = clients.tool_consumer("sluice-metadata")?;
            let metadata = tokio::task::block_in_place(|| {
                consumer.fetch_metadata(Some(topic), Duration::from_secs(30))
            })?;
            Ok(metadata
                .topics()
                .iter()
                .find(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty())
                .map(|t| t.partitions().len() as i32))
        };
        if let Some(n) = count(self)? {
            return Ok(n);
        }
        if let Some(embedded) = &self.embedded {
            embedded.create_topic(topic, partitions).await?;
            return Ok(partitions);
        }
        let admin = self.admin()?;
        let mut new = NewTopic::new(topic, partitions, TopicReplication::Fixed(replication));
        if compact {
            new = new.set("cleanup.policy", "compact");
        }
        let results = admin
            .create_topics(
                [&new],
                &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
            )
            .await?;
        for r in results {
            match r {
                Ok(topic) => tracing::info!(topic, partitions, compact, "created internal topic"),
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((topic, code)) => anyhow::bail!("creating topic `{topic}`: {code}"),
            }
        }
        Ok(count(self)?.unwrap_or(partitions))
    }

    /// Creates each topic that does not exist yet.
    pub async fn ensure_topics(
        &self,
        topics: &[String],
        partitions: i32,
        replication: i32,
    ) -> anyhow::Result<()> {
        if topics.is_empty() {
            return Ok(());
        }
        if let Some(embedded) = &self.embedded {
            for t in topics {
                embedded.create_topic(t, partitions).await?;
            }
            return Ok(());
        }
        let admin = self.admin()?;
        // Only what is missing is created: that needs no CREATE permission
        // for existing topics (and no CreateTopics support at all).
        let existing: Vec<String> = {
            let client = admin.inner();
            let metadata = tokio::task::block_in_place(|| {
                client.fetch_metadata(None, Duration::from_secs(30))
            })?;
            metadata
                .topics()
                .iter()
                .filter(|t| t.error().is_none() && !t.partitions().is_empty())
                .map(|t| t.name().to_string())
                .collect()
        };
        let missing: Vec<&String> = topics.iter().filter(|t| !existing.contains(t)).collect();
        if missing.is_empty() {
            return Ok(());
        }
        let new: Vec<NewTopic<'_>> = missing
            .iter()
            .map(|t| NewTopic::new(t, partitions, TopicReplication::Fixed(replication)))
            .collect();
        let results = admin
            .create_topics(
                &new,
                &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
            )
            .await?;
        for r in results {
            match r {
                Ok(topic) => tracing::info!(topic, partitions, "created topic"),
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((topic, code)) => anyhow::bail!("creating topic `{topic}`: {code}"),
            }
        }
        Ok(())
    }

    /// An admin client with the worker's `admin.*` keys.
    fn admin(&self) -> KafkaResult<AdminClient<DefaultClientContext>> {
        let mut c = self.base();
        for (k, v) in &self.admin_overrides {
            c.set(k, v);
        }
        c.create()
    }
}

/// One Admin request for `group`'s offsets of `tpl`, answered within
/// [`GROUP_OFFSETS_TIMEOUT`]; any partition refused is an error naming
/// it. Blocking.
fn admin_group_offsets(
    admin: &AdminClient<DefaultClientContext>,
    op: GroupOffsetsOp,
    group: &str,
    tpl: &TopicPartitionList,
) -> Result<(), GroupOffsetsError> {
    let api = op.api();
    let failed = |code, message: String| GroupOffsetsError::Failed { api, code, message };
    let group_c = CString::new(group).map_err(|_| {
        failed(
            RDKafkaErrorCode::InvalidArgument,
            format!("group id `{group}` contains NUL"),
        )
    })?;
    let rk = admin.inner().native_ptr();
    // SAFETY (every `unsafe` below): `rk` is a live client for as long as
    // `admin` is borrowed; every object created is owned by a guard that
    // frees it whichever way this returns (librdkafka copies the request
    // and its options when the call is made); what the result event points
    // to is read only while `event` is alive, and copied out.
    let options = Owned::new(
        unsafe {
            rd::rd_kafka_AdminOptions_new(
                rk,
                match op {
                    GroupOffsetsOp::Alter => {
                        rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_ALTERCONSUMERGROUPOFFSETS
                    }
                    GroupOffsetsOp::Delete => {
                        rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DELETECONSUMERGROUPOFFSETS
                    }
                },
            )
        },
        rd::rd_kafka_AdminOptions_destroy,
    )
    .ok_or_else(|| failed(RDKafkaErrorCode::Fail, "no admin options".into()))?;
    let mut errstr = [0 as c_char; 512];
    let timeout_ms = GROUP_OFFSETS_TIMEOUT.as_millis() as c_int;
    let set = unsafe {
        rd::rd_kafka_AdminOptions_set_request_timeout(
            options.0,
            timeout_ms,
            errstr.as_mut_ptr(),
            errstr.len(),
        )
    };
    if set != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        let message = unsafe { CStr::from_ptr(errstr.as_ptr()) };
        return Err(failed(set.into(), message.to_string_lossy().into_owned()));
    }
    let queue = Owned::new(
        unsafe { rd::rd_kafka_queue_new(rk) },
        rd::rd_kafka_queue_destroy,
    )
    .ok_or_else(|| failed(RDKafkaErrorCode::Fail, "no result queue".into()))?;
    match op {
        GroupOffsetsOp::Alter => {
            let request = Owned::new(
                unsafe { rd::rd_kafka_AlterConsumerGroupOffsets_new(group_c.as_ptr(), tpl.ptr()) },
                rd::rd_kafka_AlterConsumerGroupOffsets_destroy,
            )
            .ok_or_else(|| failed(RDKafkaErrorCode::Fail, "no request".into()))?;
            let mut requests = [request.0];
            unsafe {
                rd::rd_kafka_AlterConsumerGroupOffsets(
                    rk,
                    requests.as_mut_ptr(),
                    1,
                    options.0,
                    queue.0,
                )
            };
        }
        GroupOffsetsOp::Delete => {
            let request = Owned::new(
                unsafe { rd::rd_kafka_DeleteConsumerGroupOffsets_new(group_c.as_ptr(), tpl.ptr()) },
                rd::rd_kafka_DeleteConsumerGroupOffsets_destroy,
            )
            .ok_or_else(|| failed(RDKafkaErrorCode::Fail, "no request".into()))?;
            let mut requests = [request.0];
            unsafe {
                rd::rd_kafka_DeleteConsumerGroupOffsets(
                    rk,
                    requests.as_mut_ptr(),
                    1,
                    options.0,
                    queue.0,
                )
            };
        }
    }
    // librdkafka answers by the request timeout; the margin only covers
    // its bookkeeping.
    let wait_ms = timeout_ms.saturating_add(5_000);
    let event = Owned::new(
        unsafe { rd::rd_kafka_queue_poll(queue.0, wait_ms) },
        rd::rd_kafka_event_destroy,
    )
    .ok_or(GroupOffsetsError::Timeout {
        api,
        timeout: GROUP_OFFSETS_TIMEOUT,
    })?;
    let code: RDKafkaErrorCode = unsafe { rd::rd_kafka_event_error(event.0) }.into();
    if code != RDKafkaErrorCode::NoError {
        let message = unsafe { c_text(rd::rd_kafka_event_error_string(event.0)) };
        return Err(op.error(group, code, message, None));
    }
    let mut count = 0usize;
    let groups = unsafe {
        match op {
            GroupOffsetsOp::Alter => {
                let result = rd::rd_kafka_event_AlterConsumerGroupOffsets_result(event.0);
                if result.is_null() {
                    std::ptr::null_mut()
                } else {
                    rd::rd_kafka_AlterConsumerGroupOffsets_result_groups(result, &mut count)
                }
            }
            GroupOffsetsOp::Delete => {
                let result = rd::rd_kafka_event_DeleteConsumerGroupOffsets_result(event.0);
                if result.is_null() {
                    std::ptr::null_mut()
                } else {
                    rd::rd_kafka_DeleteConsumerGroupOffsets_result_groups(result, &mut count)
                }
            }
        }
    };
    if groups.is_null() {
        return Err(failed(
            RDKafkaErrorCode::Fail,
            "the answer was not the request's result".into(),
        ));
    }
    for i in 0..count {
        let result = unsafe { *groups.add(i) };
        let error = unsafe { rd::rd_kafka_group_result_error(result) };
        if !error.is_null() {
            let code: RDKafkaErrorCode = unsafe { rd::rd_kafka_error_code(error) }.into();
            let message = unsafe { c_text(rd::rd_kafka_error_string(error)) };
            return Err(op.error(group, code, message, None));
        }
        let partitions = unsafe { rd::rd_kafka_group_result_partitions(result) };
        if partitions.is_null() {
            continue;
        }
        let partitions = unsafe { &*partitions };
        for j in 0..usize::try_from(partitions.cnt).unwrap_or(0) {
            let p = unsafe { &*partitions.elems.add(j) };
            let code: RDKafkaErrorCode = p.err.into();
            if code != RDKafkaErrorCode::NoError {
                let topic = unsafe { c_text(p.topic) };
                return Err(op.error(group, code, code.to_string(), Some((topic, p.partition))));
            }
        }
    }
    Ok(())
}

/// The partitions of each of `topics`, from `consumer`'s metadata.
fn partitions_of(
    consumer: &BaseConsumer,
    topics: &[String],
) -> anyhow::Result<BTreeMap<String, Vec<i32>>> {
    let mut out = BTreeMap::new();
    for topic in topics {
        let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(10))?;
        let partitions = metadata
            .topics()
            .iter()
            .filter(|t| t.name() == topic)
            .flat_map(|t| t.partitions().iter().map(|p| p.id()))
            .collect();
        out.insert(topic.clone(), partitions);
    }
    Ok(out)
}

/// A librdkafka object freed by its destructor when dropped.
struct Owned<T>(*mut T, unsafe extern "C" fn(*mut T));

impl<T> Owned<T> {
    /// None for a null pointer (nothing to free).
    fn new(ptr: *mut T, destroy: unsafe extern "C" fn(*mut T)) -> Option<Self> {
        (!ptr.is_null()).then_some(Self(ptr, destroy))
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: the pointer is non-null, was made by the matching `_new`,
        // and is freed only here.
        unsafe { (self.1)(self.0) }
    }
}

/// A C string librdkafka owns, copied (empty for null).
///
/// # Safety
/// `s` is null or a NUL-terminated string alive for the call.
unsafe fn c_text(s: *const c_char) -> String {
    if s.is_null() {
        return String::new();
    }
    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
}
