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
//! The component implements the `bytes` world of `sdk/wit/transform.wit`:
//! a batch crosses the boundary as one buffer each way, in the encoding of
//! [`crate::codec`], rather than as a string or list lowered per field of
//! every record (which costs a call into the guest's allocator each).
//!
//! Errors carry their class: [`ConnectError::data`] (this record is bad),
//! [`ConnectError::retriable`] (try again later), [`ConnectError::fatal`]
//! (stop the task). A panic traps the instance; the runtime treats it as a
//! `data` error for the record and starts a fresh instance.

pub mod alloc;

use std::any::Any;
use std::cell::RefCell;

use crate::codec;
use crate::config::ConfigMap;
use crate::error::ConnectError;
use crate::record::Record;

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "bytes",
        pub_export_macro: true,
        export_macro_name: "__export_bytes_world",
        default_bindings_module: "sluice_sdk::guest::bindings",
    });
}

#[doc(hidden)]
pub use bindings::__export_bytes_world;

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

#[doc(hidden)]
pub fn configure<T: Transform>(config: Vec<u8>) -> Vec<u8> {
    let status = codec::decode_config(&config)
        .map_err(|e| ConnectError::fatal(format!("the host sent a malformed config: {e}")))
        .and_then(|config| T::configure(config.into_iter().collect()))
        .map(|t| INSTANCE.with(|cell| *cell.borrow_mut() = Some(Box::new(t))));
    codec::encode_status(&status)
}

#[doc(hidden)]
pub fn transform_batch<T: Transform>(input: Vec<u8>) -> Vec<u8> {
    // A malformed batch is the host's bug, not a record's: trap (the host
    // then replays the records one by one on a fresh instance).
    let mut reader = codec::Reader::new(&input).expect("the host sent a malformed batch");
    let count = reader.u32().expect("the host sent a malformed batch");
    // Most transforms return about what they get.
    let mut out = codec::Writer::with_capacity(input.len() + input.len() / 4 + 64);
    out.u32(count);
    INSTANCE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let mut transform = slot.as_mut().and_then(|b| b.downcast_mut::<T>());
        for _ in 0..count {
            let record = reader.record().expect("the host sent a malformed batch");
            let result = match transform.as_mut() {
                Some(t) => t.transform(record),
                None => Err(ConnectError::fatal("transform called before configure")),
            };
            out.result(&result);
        }
    });
    out.finish()
}

/// Exports a [`Transform`] as the component's `bytes` world (`configure`
/// and `transform-batch`), and installs the [`alloc`] module's allocator as the
/// component's global allocator: it serves the small blocks every record
/// needs in a few instructions, where wasi-libc's allocator takes hundreds.
///
/// A component that sets its own `#[global_allocator]` says so, and keeps
/// it: `export_transform!(MyTransform, own_allocator)`.
#[macro_export]
macro_rules! export_transform {
    ($t:ty) => {
        $crate::export_transform!($t, own_allocator);

        #[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
        #[global_allocator]
        static __SLUICE_GUEST_ALLOCATOR: $crate::guest::alloc::GuestAllocator =
            $crate::guest::alloc::GuestAllocator::new();
    };
    ($t:ty, own_allocator) => {
        struct __SluiceTransformExport;

        impl $crate::guest::bindings::Guest for __SluiceTransformExport {
            fn configure(config: ::std::vec::Vec<u8>) -> ::std::vec::Vec<u8> {
                $crate::guest::configure::<$t>(config)
            }

            fn transform_batch(input: ::std::vec::Vec<u8>) -> ::std::vec::Vec<u8> {
                $crate::guest::transform_batch::<$t>(input)
            }
        }

        $crate::guest::__export_bytes_world!(__SluiceTransformExport with_types_in $crate::guest::bindings);
    };
}
