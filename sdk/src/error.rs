//! The one error type that crosses from connectors and transforms into the
//! runtime. Its kind, not its message, decides what happens next.

use std::fmt;

/// What the runtime must do with a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// This record is bad (malformed, rejected by a transform, violates a
    /// constraint). Tolerated and dead-lettered, or fails the task, according
    /// to `errors.tolerance`. Retrying does not help.
    Data,
    /// The outside world failed (broker or database unreachable, timeout).
    /// Retried with backoff within the retry budget; never dead-lettered.
    Retriable,
    /// Nothing sensible can continue (bad credentials, fenced producer,
    /// a bug). Fails the task.
    Fatal,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Data => "data",
            ErrorKind::Retriable => "retriable",
            ErrorKind::Fatal => "fatal",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The class of [`ConnectError::fenced`].
pub const FENCED_CLASS: &str = "CommitFenced";

/// A failure in a connector or a transform, classified by [`ErrorKind`].
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ConnectError {
    pub kind: ErrorKind,
    /// A short name for what went wrong (`MalformedJson`,
    /// `ConstraintViolation`, `TransformTrap`, ...), shown in dead-letter
    /// headers and used to replay by error class. Defaults by kind.
    pub class: Option<String>,
    pub message: String,
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl ConnectError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            class: None,
            message: message.into(),
            source: None,
        }
    }

    /// Names the error class (see [`ConnectError::class_name`]).
    pub fn with_class(mut self, class: impl Into<String>) -> Self {
        self.class = Some(class.into());
        self
    }

    /// The error class: the one set, or `DataError`, `RetriableError` or
    /// `FatalError` by kind.
    pub fn class_name(&self) -> &str {
        self.class.as_deref().unwrap_or(match self.kind {
            ErrorKind::Data => "DataError",
            ErrorKind::Retriable => "RetriableError",
            ErrorKind::Fatal => "FatalError",
        })
    }

    pub fn data(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Data, message)
    }

    pub fn retriable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Retriable, message)
    }

    pub fn fatal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Fatal, message)
    }

    /// An exactly-once commit refused because another task has committed
    /// past where this batch began (this task lost the partition): the
    /// runtime drops the batch and reads on from the stored offsets.
    pub fn fenced(message: impl Into<String>) -> Self {
        Self::retriable(message).with_class(FENCED_CLASS)
    }

    /// Whether this is [`ConnectError::fenced`].
    pub fn is_fenced(&self) -> bool {
        self.kind == ErrorKind::Retriable && self.class.as_deref() == Some(FENCED_CLASS)
    }

    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// The message followed by its chain of causes, for task traces.
    pub fn full_message(&self) -> String {
        let mut out = self.message.clone();
        let mut cause = std::error::Error::source(self);
        while let Some(c) = cause {
            out.push_str(": ");
            out.push_str(&c.to_string());
            cause = c.source();
        }
        out
    }
}

/// What a caught panic says: its message if it carries one.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}
