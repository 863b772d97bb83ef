//! Where a task's time goes, by span: the wall time from each span's
//! creation to its close, summed by name. The JDBC sink opens a debug span
//! around each step of a batch's write (planning, `BEGIN`, the statements,
//! `COMMIT`), so the sums show which step the write waits on.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::span::{Attributes, Id};
use tracing::{Level, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{Layer, Registry};

/// Count and total wall time per span name.
pub type Totals = BTreeMap<&'static str, (u64, Duration)>;

#[derive(Clone, Default)]
pub struct SpanTimes(Arc<Mutex<Totals>>);

struct Opened(Instant);

impl SpanTimes {
    /// Installs the layer for the spans of `targets` (crate names, at
    /// debug level) as the process's subscriber.
    pub fn install(targets: &[&str]) -> SpanTimes {
        let times = SpanTimes::default();
        let filter = targets
            .iter()
            .fold(Targets::new(), |f, t| f.with_target(*t, Level::DEBUG));
        let subscriber = Registry::default().with(times.clone().with_filter(filter));
        tracing::subscriber::set_global_default(subscriber).expect("no subscriber installed yet");
        times
    }

    pub fn snapshot(&self) -> Totals {
        self.0.lock().expect("span times").clone()
    }

    /// What `later` added to `earlier`, as `name: n x mean ms` per span,
    /// with each span's total as a share of `seconds` of wall time.
    pub fn report(earlier: &Totals, later: &Totals, seconds: f64) -> String {
        later
            .iter()
            .filter_map(|(name, (n, total))| {
                let (n0, total0) = earlier.get(name).copied().unwrap_or_default();
                let (n, total) = (n - n0, total.saturating_sub(total0));
                (n > 0).then(|| {
                    format!(
                        "{name} {n} x {:.2} ms ({:.2} of the run)",
                        total.as_secs_f64() * 1000.0 / n as f64,
                        total.as_secs_f64() / seconds
                    )
                })
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for SpanTimes {
    fn on_new_span(&self, _: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Opened(Instant::now()));
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(Opened(at)) = span.extensions().get::<Opened>().map(|o| Opened(o.0)) else {
            return;
        };
        let mut totals = self.0.lock().expect("span times");
        let entry = totals.entry(span.name()).or_default();
        entry.0 += 1;
        entry.1 += at.elapsed();
    }
}
