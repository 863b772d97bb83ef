//! Every Kafka client is built here, so the safe defaults (acks=all,
//! idempotence, no auto-commit, read_committed, no silent offset reset)
//! cannot be forgotten; plus topic creation, the offsets topic, Kafka
//! transactions and the embedded development broker.

mod admin;
mod clients;
mod consumer_context;
mod embedded;
mod headers;
mod offsets_topic;
mod produce;
pub mod transaction;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

pub use admin::GroupOffsetsError;
pub use clients::{HEARTBEAT_INTERVAL_MS, KafkaClients, SESSION_TIMEOUT_MS};
pub use consumer_context::{ConsumerEvent, LogReaderContext, TaskConsumerContext};
pub use embedded::{EMBEDDED_PARTITION_LIMIT_BYTES, EmbeddedBroker};
pub use headers::{decode_header, read_headers};
pub use produce::{
    await_delivery, enqueue, future_record, produce_each, produce_error, send_awaited, send_now,
};

/// The consumer error that means the committed position no longer exists
/// on the broker: records were lost (retention, or the embedded broker's
/// size limit) and must not be skipped silently.
pub fn is_offset_out_of_range(e: &KafkaError) -> bool {
    matches!(
        e,
        KafkaError::MessageConsumption(
            RDKafkaErrorCode::AutoOffsetReset | RDKafkaErrorCode::OffsetOutOfRange
        )
    )
}
