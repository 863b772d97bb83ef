//! The embedded development broker (librdkafka's mock cluster).

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::mocking::MockCluster;
use rdkafka::types::RDKafkaRespErr;
use tokio::sync::{mpsc, oneshot};

/// librdkafka's mock cluster, owned by a thread of its own (it is not
/// `Send`), for development: real Kafka protocol on a loopback port, nothing
/// kept across restarts.
#[derive(Clone)]
pub struct EmbeddedBroker {
    bootstrap: String,
    commands: mpsc::UnboundedSender<(BrokerCommand, oneshot::Sender<anyhow::Result<()>>)>,
}

/// What the thread that owns the mock cluster is asked to do.
enum BrokerCommand {
    CreateTopic(String, i32),
    /// Fail the next requests of one kind with these errors, in order
    /// (fault injection, for testing error handling against the real
    /// protocol).
    FailRequests(rdkafka::types::RDKafkaApiKey, Vec<RDKafkaRespErr>),
    /// Take the broker down (`false`) or bring it back up (`true`).
    SetBrokerUp(bool),
}

/// Data beyond about this much per partition is silently dropped by the mock.
pub const EMBEDDED_PARTITION_LIMIT_BYTES: u64 = 5 * 1024 * 1024;

impl EmbeddedBroker {
    pub fn start() -> anyhow::Result<Self> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (tx, mut rx) =
            mpsc::unbounded_channel::<(BrokerCommand, oneshot::Sender<anyhow::Result<()>>)>();
        std::thread::Builder::new()
            .name("embedded-broker".into())
            .spawn(move || {
                let cluster = match MockCluster::new(1) {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = ready_tx
                            .send(Err(anyhow::anyhow!("starting the embedded broker: {e}")));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(cluster.bootstrap_servers()));
                // Serve commands until every handle is dropped.
                while let Some((command, reply)) = rx.blocking_recv() {
                    let result = match command {
                        BrokerCommand::CreateTopic(topic, partitions) => {
                            match cluster.create_topic(&topic, partitions, 1) {
                                Ok(())
                                | Err(KafkaError::MockCluster(
                                    RDKafkaErrorCode::TopicAlreadyExists,
                                )) => Ok(()),
                                Err(e) => Err(anyhow::anyhow!(
                                    "creating topic `{topic}` on the embedded broker: {e}"
                                )),
                            }
                        }
                        BrokerCommand::FailRequests(api, errors) => {
                            cluster.request_errors(api, &errors);
                            Ok(())
                        }
                        BrokerCommand::SetBrokerUp(up) => {
                            let result = if up {
                                cluster.broker_up(1)
                            } else {
                                cluster.broker_down(1)
                            };
                            result.map_err(|e| anyhow::anyhow!("changing the embedded broker: {e}"))
                        }
                    };
                    let _ = reply.send(result);
                }
            })?;
        let bootstrap = ready_rx.recv()??;
        Ok(Self {
            bootstrap,
            commands: tx,
        })
    }

    pub fn bootstrap_servers(&self) -> &str {
        &self.bootstrap
    }

    pub async fn create_topic(&self, topic: &str, partitions: i32) -> anyhow::Result<()> {
        self.command(BrokerCommand::CreateTopic(topic.to_string(), partitions))
            .await
    }

    /// Makes the next requests of kind `api` fail with `errors`, one per
    /// request, in order (librdkafka's mock cluster fault injection).
    pub async fn fail_requests(
        &self,
        api: rdkafka::types::RDKafkaApiKey,
        errors: Vec<RDKafkaRespErr>,
    ) -> anyhow::Result<()> {
        self.command(BrokerCommand::FailRequests(api, errors)).await
    }

    /// Takes the broker down (`false`: every connection fails) or brings
    /// it back (`true`), for testing outages against the real protocol.
    pub async fn set_up(&self, up: bool) -> anyhow::Result<()> {
        self.command(BrokerCommand::SetBrokerUp(up)).await
    }

    async fn command(&self, command: BrokerCommand) -> anyhow::Result<()> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send((command, tx))
            .map_err(|_| anyhow::anyhow!("the embedded broker has stopped"))?;
        rx.await
            .map_err(|_| anyhow::anyhow!("the embedded broker has stopped"))?
    }
}
