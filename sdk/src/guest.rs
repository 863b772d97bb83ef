//! Writing a transform component in Rust: implement [`Transform`] and call
//! [`export_transform!`](crate::export_transform) once. Build with
//! `cargo build --target wasm32-wasip2` (a `cdylib` crate).
//!
//! ```no_run
//! use sluice_sdk::guest::{Config, Transform};
//! use sluice_sdk::{ConnectError, Record};
//!
//! /// Drops records whose `status` is `cancelled`, tags the rest.
//! struct DropCancelled {
//!     tag: String,
//! }
//!
//! impl Transform for DropCancelled {
//!     fn configure(config: Config) -> Result<Self, ConnectError> {
//!         Ok(Self { tag: config.get("tag").cloned().unwrap_or_else(|| "seen".into()) })
//!     }
//!
//!     fn transform(&mut self, mut record: Record) -> Result<Vec<Record>, ConnectError> {
//!         let mut value = record.value_json().map_err(|e| ConnectError::data(format!("not JSON: {e}")))?;
//!         if value["status"] == "cancelled" {
//!             return Ok(vec![]); // drop
//!         }
//!         value["tag"] = self.tag.clone().into();
//!         record.set_value_json(&value);
//!         record.add_header("x-tagged", Some(b"1".to_vec()));
//!         Ok(vec![record]) // map; return several records to flat-map
//!     }
//! }
//!
//! sluice_sdk::export_transform!(DropCancelled);
//! ```
//!
//! Errors carry their class: [`ConnectError::data`] (this record is bad),
//! [`ConnectError::retriable`] (try again later), [`ConnectError::fatal`]
//! (stop the task). A panic traps the instance; the runtime treats it as a
//! `data` error for the record and starts a fresh instance.

use std::any::Any;
use std::cell::RefCell;

use crate::config::ConfigMap;
use crate::error::{ConnectError, ErrorKind};
use crate::record::{Header, Record};

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "transform",
        pub_export_macro: true,
        export_macro_name: "__export_transform_world",
        default_bindings_module: "sluice_sdk::guest::bindings",
    });
}

#[doc(hidden)]
pub use bindings::__export_transform_world;
use bindings::sluice::transform::types::{
    ErrorClass, Header as WitHeader, KafkaRecord, TransformError,
};

/// The transform's config: every `transforms.<alias>.*` key except `type`
/// and `module`, prefix removed. Parse it into a typed struct with
/// [`crate::config::from_string_map`].
pub type Config = ConfigMap;

/// A record transform. One value lives per component instance.
pub trait Transform: Sized + 'static {
    /// Called once, before any record.
    fn configure(config: Config) -> Result<Self, ConnectError>;

    /// Zero records drops the input, one maps it, several flat-map it.
    fn transform(&mut self, record: Record) -> Result<Vec<Record>, ConnectError>;
}

thread_local! {
    static INSTANCE: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

fn with_instance<T: Transform, R>(f: impl FnOnce(&mut T) -> R) -> Result<R, TransformError> {
    INSTANCE.with(|cell| {
        let mut slot = cell.borrow_mut();
        match slot.as_mut().and_then(|b| b.downcast_mut::<T>()) {
            Some(t) => Ok(f(t)),
            None => Err(TransformError {
                class: ErrorClass::Fatal,
                message: "transform called before configure".into(),
            }),
        }
    })
}

fn to_wit_error(e: ConnectError) -> TransformError {
    TransformError {
        class: match e.kind {
            ErrorKind::Data => ErrorClass::Data,
            ErrorKind::Retriable => ErrorClass::Retriable,
            ErrorKind::Fatal => ErrorClass::Fatal,
        },
        message: e.full_message(),
    }
}

fn from_wit(r: KafkaRecord) -> Record {
    Record {
        topic: r.topic,
        partition: r.partition,
        offset: r.offset,
        timestamp: r.timestamp,
        key: r.key,
        value: r.value,
        headers: r
            .headers
            .into_iter()
            .map(|h| Header {
                key: h.key,
                value: h.value,
            })
            .collect(),
        ..Default::default()
    }
}

fn to_wit(r: Record) -> KafkaRecord {
    KafkaRecord {
        topic: r.topic,
        partition: r.partition,
        offset: r.offset,
        timestamp: r.timestamp,
        key: r.key,
        value: r.value,
        headers: r
            .headers
            .into_iter()
            .map(|h| WitHeader {
                key: h.key,
                value: h.value,
            })
            .collect(),
    }
}

#[doc(hidden)]
pub fn configure<T: Transform>(config: Vec<(String, String)>) -> Result<(), TransformError> {
    let t = T::configure(config.into_iter().collect()).map_err(to_wit_error)?;
    INSTANCE.with(|cell| *cell.borrow_mut() = Some(Box::new(t)));
    Ok(())
}

#[doc(hidden)]
pub fn transform<T: Transform>(input: KafkaRecord) -> Result<Vec<KafkaRecord>, TransformError> {
    with_instance::<T, _>(|t| t.transform(from_wit(input)))?
        .map(|out| out.into_iter().map(to_wit).collect())
        .map_err(to_wit_error)
}

#[doc(hidden)]
pub fn transform_batch<T: Transform>(
    input: Vec<KafkaRecord>,
) -> Vec<Result<Vec<KafkaRecord>, TransformError>> {
    let n = input.len();
    match with_instance::<T, _>(|t| {
        input
            .into_iter()
            .map(|r| {
                t.transform(from_wit(r))
                    .map(|out| out.into_iter().map(to_wit).collect())
                    .map_err(to_wit_error)
            })
            .collect::<Vec<_>>()
    }) {
        Ok(results) => results,
        Err(e) => (0..n).map(|_| Err(e.clone())).collect(),
    }
}

/// Exports a [`Transform`] as the component's `sluice:transform/transformer`.
#[macro_export]
macro_rules! export_transform {
    ($t:ty) => {
        struct __SluiceTransformExport;

        impl $crate::guest::bindings::exports::sluice::transform::transformer::Guest for __SluiceTransformExport {
            fn configure(
                config: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
            ) -> ::std::result::Result<(), $crate::guest::bindings::sluice::transform::types::TransformError> {
                $crate::guest::configure::<$t>(config)
            }

            fn transform(
                input: $crate::guest::bindings::sluice::transform::types::KafkaRecord,
            ) -> ::std::result::Result<
                ::std::vec::Vec<$crate::guest::bindings::sluice::transform::types::KafkaRecord>,
                $crate::guest::bindings::sluice::transform::types::TransformError,
            > {
                $crate::guest::transform::<$t>(input)
            }

            fn transform_batch(
                input: ::std::vec::Vec<$crate::guest::bindings::sluice::transform::types::KafkaRecord>,
            ) -> ::std::vec::Vec<
                ::std::result::Result<
                    ::std::vec::Vec<$crate::guest::bindings::sluice::transform::types::KafkaRecord>,
                    $crate::guest::bindings::sluice::transform::types::TransformError,
                >,
            > {
                $crate::guest::transform_batch::<$t>(input)
            }
        }

        $crate::guest::__export_transform_world!(__SluiceTransformExport with_types_in $crate::guest::bindings);
    };
}
