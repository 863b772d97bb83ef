//! Kafka Connect's `errors.*` keys: tolerance, retry budgets, logging and
//! the dead-letter queue.

use std::time::{Duration, Instant};

use serde::Deserialize;
use sluice_sdk::config::{ConfigError, ConfigMap, from_string_map};

/// How long retries may go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryBudget {
    Within(Duration),
    Forever,
}

impl RetryBudget {
    pub(crate) fn from_ms(ms: i64, key: &str) -> Result<Self, ConfigError> {
        match ms {
            -1 => Ok(RetryBudget::Forever),
            ms if ms >= 0 => Ok(RetryBudget::Within(Duration::from_millis(ms as u64))),
            _ => Err(ConfigError::new(
                key,
                "must be -1 (forever) or a number of milliseconds",
            )),
        }
    }

    pub(crate) fn allows(&self, started: Instant, next_delay: Duration) -> bool {
        match self {
            RetryBudget::Forever => true,
            RetryBudget::Within(d) => started.elapsed() + next_delay <= *d,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterQueue {
    pub topic: String,
    pub replication_factor: i32,
    pub context_headers: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorPolicy {
    pub tolerate_all: bool,
    pub retry: RetryBudget,
    pub retry_delay_max: Duration,
    pub retry_max_attempts: Option<u32>,
    pub infrastructure_retry: RetryBudget,
    pub log: bool,
    pub log_messages: bool,
    pub dlq: Option<DeadLetterQueue>,
    /// `errors.restart.*`: FAILED tasks restarted automatically.
    pub restart: Option<RestartPolicy>,
}

/// `errors.restart.policy=backoff`: a FAILED task is restarted after
/// `initial_delay`, doubling up to `max_delay` at each failure in a row,
/// at most `max_attempts` times in a row (unbounded when `None`). A task
/// that then runs for 5 minutes (or `max_delay`, if longer) starts the
/// count again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestartPolicy {
    pub initial_delay: Duration,
    pub max_delay: Duration,
    pub max_attempts: Option<u32>,
}

impl RestartPolicy {
    /// The wait before automatic restart `attempt` (0 for the first).
    pub fn delay(&self, attempt: u32) -> Duration {
        self.initial_delay
            .saturating_mul(1u32 << attempt.min(20))
            .min(self.max_delay)
    }

    /// The policy a connector config sets, if any (its `errors.*` keys,
    /// already validated when the connector was).
    pub fn of(config: &ConfigMap) -> Option<Self> {
        let keys: ConfigMap = config
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("errors.")?.to_string(), v.clone())))
            .collect();
        ErrorPolicy::parse(&keys, &[]).ok()?.restart
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum RestartKind {
    None,
    Backoff,
}

impl Default for ErrorPolicy {
    fn default() -> Self {
        Self {
            tolerate_all: false,
            retry: RetryBudget::Within(Duration::ZERO),
            retry_delay_max: Duration::from_secs(60),
            retry_max_attempts: None,
            infrastructure_retry: RetryBudget::Within(Duration::from_secs(300)),
            log: false,
            log_messages: false,
            dlq: None,
            restart: None,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Tolerance {
    None,
    All,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ErrorKeys {
    #[serde(default)]
    tolerance: Option<Tolerance>,
    #[serde(rename = "retry.timeout", default)]
    retry_timeout: Option<i64>,
    #[serde(rename = "retry.delay.max.ms", default)]
    retry_delay_max_ms: Option<u64>,
    #[serde(rename = "retry.max.attempts", default)]
    retry_max_attempts: Option<u32>,
    #[serde(rename = "infrastructure.retry.timeout", default)]
    infrastructure_retry_timeout: Option<i64>,
    #[serde(rename = "log.enable", default)]
    log_enable: Option<bool>,
    #[serde(rename = "log.include.messages", default)]
    log_include_messages: Option<bool>,
    #[serde(rename = "deadletterqueue.topic.name", default)]
    dlq_topic: Option<String>,
    #[serde(rename = "deadletterqueue.topic.replication.factor", default)]
    dlq_replication: Option<i32>,
    #[serde(rename = "deadletterqueue.context.headers.enable", default)]
    dlq_context_headers: Option<bool>,
    #[serde(rename = "restart.policy", default)]
    restart_policy: Option<RestartKind>,
    #[serde(rename = "restart.initial.delay.ms", default)]
    restart_initial_delay_ms: Option<u64>,
    #[serde(rename = "restart.max.delay.ms", default)]
    restart_max_delay_ms: Option<u64>,
    #[serde(rename = "restart.max.attempts", default)]
    restart_max_attempts: Option<i64>,
}

impl ErrorPolicy {
    /// Parses the `errors.*` keys (prefix removed); `inputs` are the
    /// connector's input topics, which the DLQ may not be.
    pub fn parse(keys: &ConfigMap, inputs: &[String]) -> Result<Self, ConfigError> {
        let k: ErrorKeys = from_string_map(keys).map_err(|e| e.in_namespace("errors."))?;
        let d = ErrorPolicy::default();
        let dlq = match k
            .dlq_topic
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
        {
            None => None,
            Some(topic) => {
                if inputs.contains(&topic) {
                    return Err(ConfigError::new(
                        "errors.deadletterqueue.topic.name",
                        format!(
                            "`{topic}` is one of the connector's input topics; dead-lettered records would be read again"
                        ),
                    ));
                }
                Some(DeadLetterQueue {
                    topic,
                    replication_factor: k.dlq_replication.unwrap_or(3),
                    context_headers: k.dlq_context_headers.unwrap_or(false),
                })
            }
        };
        let restart = match k.restart_policy {
            None | Some(RestartKind::None) => None,
            Some(RestartKind::Backoff) => {
                let policy = RestartPolicy {
                    initial_delay: Duration::from_millis(k.restart_initial_delay_ms.unwrap_or(1000)),
                    max_delay: Duration::from_millis(k.restart_max_delay_ms.unwrap_or(60_000)),
                    max_attempts: match k.restart_max_attempts.unwrap_or(-1) {
                        -1 => None,
                        n => Some(u32::try_from(n).ok().filter(|n| *n > 0).ok_or_else(|| {
                            ConfigError::new(
                                "errors.restart.max.attempts",
                                format!("{n} is not a number of restarts: give 1 or more, or -1 for no limit"),
                            )
                        })?),
                    },
                };
                if policy.initial_delay.is_zero() || policy.initial_delay > policy.max_delay {
                    return Err(ConfigError::new(
                        "errors.restart.initial.delay.ms",
                        "must be at least 1 and at most errors.restart.max.delay.ms",
                    ));
                }
                Some(policy)
            }
        };
        Ok(ErrorPolicy {
            restart,
            tolerate_all: matches!(k.tolerance, Some(Tolerance::All)),
            retry: match k.retry_timeout {
                Some(ms) => RetryBudget::from_ms(ms, "errors.retry.timeout")?,
                None => d.retry,
            },
            retry_delay_max: k
                .retry_delay_max_ms
                .map(Duration::from_millis)
                .unwrap_or(d.retry_delay_max),
            retry_max_attempts: k.retry_max_attempts,
            infrastructure_retry: match k.infrastructure_retry_timeout {
                Some(ms) => RetryBudget::from_ms(ms, "errors.infrastructure.retry.timeout")?,
                None => d.infrastructure_retry,
            },
            log: k.log_enable.unwrap_or(false),
            log_messages: k.log_include_messages.unwrap_or(false),
            dlq,
        })
    }
}

/// Exponential backoff from 100 ms with jitter (half to the whole delay),
/// capped at `max`.
pub fn backoff(attempt: u32, max: Duration) -> Duration {
    let base = Duration::from_millis(100).saturating_mul(1u32 << attempt.min(16));
    let capped = base.min(max);
    let jitter = rand_fraction();
    capped.mul_f64(0.5 + 0.5 * jitter)
}

fn rand_fraction() -> f64 {
    // Jitter needs no cryptographic quality: the clock's low bits mixed.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mixed = (u64::from(nanos)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11;
    (mixed as f64) / ((1u64 << 53) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(pairs: &[(&str, &str)]) -> ConfigMap {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_the_restart_policy() {
        let p = ErrorPolicy::parse(
            &keys(&[
                ("restart.policy", "backoff"),
                ("restart.initial.delay.ms", "100"),
                ("restart.max.delay.ms", "350"),
                ("restart.max.attempts", "3"),
            ]),
            &[],
        )
        .unwrap();
        let r = p.restart.unwrap();
        assert_eq!(r.max_attempts, Some(3));
        let delays: Vec<u128> = (0..4).map(|a| r.delay(a).as_millis()).collect();
        assert_eq!(delays, vec![100, 200, 350, 350]);
        assert_eq!(ErrorPolicy::parse(&keys(&[]), &[]).unwrap().restart, None);
        for bad in [
            vec![("restart.policy", "always")],
            vec![("restart.policy", "backoff"), ("restart.max.attempts", "0")],
            vec![
                ("restart.policy", "backoff"),
                ("restart.initial.delay.ms", "5000"),
                ("restart.max.delay.ms", "1000"),
            ],
        ] {
            assert!(ErrorPolicy::parse(&keys(&bad), &[]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn parses_kafka_connect_keys() {
        let p = ErrorPolicy::parse(
            &keys(&[
                ("tolerance", "all"),
                ("retry.timeout", "-1"),
                ("retry.delay.max.ms", "500"),
                ("deadletterqueue.topic.name", "dlq"),
                ("deadletterqueue.context.headers.enable", "true"),
                ("log.enable", "true"),
            ]),
            &["orders".into()],
        )
        .unwrap();
        assert!(p.tolerate_all && p.log && !p.log_messages);
        assert_eq!(p.retry, RetryBudget::Forever);
        assert_eq!(
            p.dlq.unwrap(),
            DeadLetterQueue {
                topic: "dlq".into(),
                replication_factor: 3,
                context_headers: true
            }
        );
        assert_eq!(
            ErrorPolicy::parse(&keys(&[]), &[]).unwrap(),
            ErrorPolicy::default()
        );
    }

    #[test]
    fn rejects_bad_values_by_key() {
        let err = ErrorPolicy::parse(
            &keys(&[("deadletterqueue.topic.name", "orders")]),
            &["orders".into()],
        )
        .unwrap_err();
        assert_eq!(
            err.key.as_deref(),
            Some("errors.deadletterqueue.topic.name")
        );
        let err = ErrorPolicy::parse(&keys(&[("tolerance", "some")]), &[]).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("errors.tolerance"));
        let err = ErrorPolicy::parse(&keys(&[("retry.timeout", "-5")]), &[]).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("errors.retry.timeout"));
        let err = ErrorPolicy::parse(&keys(&[("retry.colour", "1")]), &[]).unwrap_err();
        assert_eq!(err.key.as_deref(), Some("errors.retry.colour"));
    }

    #[test]
    fn backoff_grows_with_jitter_and_is_capped() {
        for attempt in 0..20 {
            let d = backoff(attempt, Duration::from_secs(2));
            let full = Duration::from_millis(100)
                .saturating_mul(1 << attempt.min(16))
                .min(Duration::from_secs(2));
            assert!(
                d >= full / 2 && d <= full,
                "attempt {attempt}: {d:?} outside {:?}..{full:?}",
                full / 2
            );
        }
    }
}
