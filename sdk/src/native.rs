//! Native connector plugins: a shared library (`cdylib`) that implements
//! [`SinkConnector`](crate::SinkConnector) or
//! [`SourceConnector`](crate::SourceConnector) and exports it with
//! [`export_sink_plugin!`](crate::export_sink_plugin) or
//! [`export_source_plugin!`](crate::export_source_plugin).
//!
//! The boundary is a C ABI of byte buffers, version [`ABI_VERSION`]:
//!
//! | symbol | |
//! |---|---|
//! | `sluice_plugin_abi_version() -> u32` | called first; a mismatch stops there |
//! | `sluice_plugin_metadata() -> Buffer` | JSON: class, type, version, description, config definition |
//! | `sluice_plugin_validate(config) -> Status` | config: JSON object of strings |
//! | `sluice_plugin_task_configs(config, max_tasks, out) -> Status` | out: JSON array of configs |
//! | `sluice_plugin_open(config, context, offsets, out_task) -> Status` | context `{connector, task_id}`; offsets JSON (sources) |
//! | `sluice_plugin_put(task, records) -> Status` | sinks; records in the `sdk/wit` byte encoding |
//! | `sluice_plugin_flush(task) -> Status` | sinks |
//! | `sluice_plugin_poll(task, out) -> Status` | sources; out: [`encode_source_batch`], empty when exhausted |
//! | `sluice_plugin_close(task)` | |
//! | `sluice_plugin_free(Buffer)` | frees a buffer the plugin allocated |
//!
//! Records cross as bytes only: schemas (`key.converter.schemas.enable`,
//! `value.converter.schemas.enable`) stay in the runtime. A native sink
//! receives payloads without their schemas; a native source's records have
//! none (written as `"schema": null`). Carrying them would be ABI version 2.
//!
//! Every buffer the plugin returns is freed by the plugin (through
//! `sluice_plugin_free`); the runtime's inputs are only borrowed for the
//! call. A panic inside the plugin is caught before it crosses the boundary
//! and returned as a fatal status carrying the panic message.

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::codec::{DecodeError, Reader, Writer};
use crate::error::{ConnectError, ErrorKind};
use crate::{SourceRecord, config::ConfigMap};

/// The ABI this SDK speaks. Bumped on any incompatible change.
pub const ABI_VERSION: u32 = 1;

/// A byte buffer allocated by the side that returned it.
#[repr(C)]
#[derive(Debug)]
pub struct Buffer {
    pub ptr: *mut u8,
    pub len: usize,
    pub cap: usize,
}

impl Buffer {
    pub fn empty() -> Self {
        Buffer {
            ptr: std::ptr::null_mut(),
            len: 0,
            cap: 0,
        }
    }

    pub fn from_vec(v: Vec<u8>) -> Self {
        let mut v = std::mem::ManuallyDrop::new(v);
        Buffer {
            ptr: v.as_mut_ptr(),
            len: v.len(),
            cap: v.capacity(),
        }
    }

    /// # Safety
    /// The buffer must come from [`Buffer::from_vec`] in this same library.
    pub unsafe fn into_vec(self) -> Vec<u8> {
        if self.ptr.is_null() {
            return Vec::new();
        }
        // SAFETY: per the contract, these parts came from a Vec of this allocator.
        unsafe { Vec::from_raw_parts(self.ptr, self.len, self.cap) }
    }

    /// # Safety
    /// `ptr` must point to `len` readable bytes for the duration of the borrow.
    pub unsafe fn borrow<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
        if ptr.is_null() || len == 0 {
            return &[];
        }
        // SAFETY: per the contract.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

/// The outcome of a call: `code` 0 ok, 1 data, 2 retriable, 3 fatal; the
/// message (UTF-8) is a buffer the plugin frees.
#[repr(C)]
#[derive(Debug)]
pub struct Status {
    pub code: u32,
    pub message: Buffer,
}

impl Status {
    pub fn ok() -> Self {
        Status {
            code: 0,
            message: Buffer::empty(),
        }
    }

    pub fn from_error(e: &ConnectError) -> Self {
        let code = match e.kind {
            ErrorKind::Data => 1,
            ErrorKind::Retriable => 2,
            ErrorKind::Fatal => 3,
        };
        let text = match &e.class {
            Some(class) => format!("{class}\u{1f}{}", e.full_message()),
            None => e.full_message(),
        };
        Status {
            code,
            message: Buffer::from_vec(text.into_bytes()),
        }
    }

    /// Reads a status's code and message (the runtime frees the message
    /// through the plugin afterwards).
    pub fn to_error(code: u32, message: &[u8]) -> Option<ConnectError> {
        let kind = match code {
            0 => return None,
            1 => ErrorKind::Data,
            2 => ErrorKind::Retriable,
            _ => ErrorKind::Fatal,
        };
        let text = String::from_utf8_lossy(message).into_owned();
        Some(match text.split_once('\u{1f}') {
            Some((class, msg)) => ConnectError::new(kind, msg).with_class(class),
            None => ConnectError::new(kind, text),
        })
    }
}

/// Runs a plugin call, turning a panic into a fatal status with its message.
pub fn guard(f: impl FnOnce() -> Result<(), ConnectError>) -> Status {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => Status::ok(),
        Ok(Err(e)) => Status::from_error(&e),
        Err(panic) => {
            let message = crate::panic_message(panic.as_ref());
            Status::from_error(
                &ConnectError::fatal(format!("the plugin panicked: {message}"))
                    .with_class("PluginPanic"),
            )
        }
    }
}

pub fn parse_config(bytes: &[u8]) -> Result<ConfigMap, ConnectError> {
    serde_json::from_slice(bytes)
        .map_err(|e| ConnectError::fatal(format!("config is not a JSON object of strings: {e}")))
}

/// A source poll's records: version byte, count, then per record its source
/// partition and offset (JSON text) and the record (`sdk/wit` encoding).
pub fn encode_source_batch(records: &[SourceRecord]) -> Vec<u8> {
    let mut w = Writer::new();
    w.u32(records.len() as u32);
    for r in records {
        w.bytes(r.source_partition.to_string().as_bytes());
        w.bytes(r.source_offset.to_string().as_bytes());
        w.record(&r.to_record());
    }
    w.finish()
}

pub fn decode_source_batch(buf: &[u8]) -> Result<Vec<SourceRecord>, DecodeError> {
    let mut r = Reader::new(buf)?;
    let n = r.u32()? as usize;
    let mut out = Vec::with_capacity(n.min(65_536));
    for _ in 0..n {
        let json = |r: &mut Reader<'_>| -> Result<serde_json::Value, DecodeError> {
            let s = r.string()?;
            serde_json::from_str(&s).map_err(|e| DecodeError {
                at: 0,
                what: format!("a source partition or offset is not JSON: {e}"),
            })
        };
        let partition = json(&mut r)?;
        let offset = json(&mut r)?;
        let record = r.record()?;
        out.push(SourceRecord {
            source_partition: partition,
            source_offset: offset,
            topic: record.topic,
            key: record.key,
            value: record.value,
            headers: record.headers,
            timestamp: record.timestamp,
            // ABI version 1 carries no schemas (a source's records are
            // written with `"schema": null` when schemas are enabled).
            key_schema: None,
            value_schema: None,
        });
    }
    r.end()?;
    Ok(out)
}

/// The plugin side: a task behind an opaque pointer, run on the caller's
/// thread (the runtime calls from a blocking thread; async task methods are
/// driven to completion here).
#[doc(hidden)]
pub mod export {
    pub use futures_executor::block_on;

    pub enum Task {
        Sink(Box<dyn crate::SinkTask>),
        Source(Box<dyn crate::SourceTask>),
    }
}

/// Exports a [`SinkConnector`](crate::SinkConnector) as a native plugin.
#[macro_export]
macro_rules! export_sink_plugin {
    ($connector:expr) => {
        $crate::__export_plugin_common!($connector, $crate::SinkConnector);

        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sluice_plugin_open(
            config: *const u8,
            config_len: usize,
            context: *const u8,
            context_len: usize,
            _offsets: *const u8,
            _offsets_len: usize,
            out_task: *mut *mut ::std::ffi::c_void,
        ) -> $crate::native::Status {
            $crate::native::guard(|| {
                let config = $crate::native::parse_config(unsafe {
                    $crate::native::Buffer::borrow(config, config_len)
                })?;
                let context = $crate::native::__context(unsafe {
                    $crate::native::Buffer::borrow(context, context_len)
                })?;
                let task = $crate::SinkConnector::create_task(&$connector, &config, context)?;
                let mut boxed = Box::new($crate::native::export::Task::Sink(task));
                if let $crate::native::export::Task::Sink(t) = boxed.as_mut() {
                    $crate::native::export::block_on(t.start())?;
                }
                unsafe { *out_task = Box::into_raw(boxed) as *mut ::std::ffi::c_void };
                Ok(())
            })
        }

        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sluice_plugin_put(
            task: *mut ::std::ffi::c_void,
            records: *const u8,
            len: usize,
        ) -> $crate::native::Status {
            $crate::native::guard(|| {
                let task = unsafe { &mut *(task as *mut $crate::native::export::Task) };
                let bytes = unsafe { $crate::native::Buffer::borrow(records, len) };
                let records = $crate::codec::decode_batch(bytes)
                    .map_err(|e| $crate::ConnectError::fatal(e.to_string()))?;
                match task {
                    $crate::native::export::Task::Sink(t) => {
                        $crate::native::export::block_on(t.put(records))
                    }
                    _ => Err($crate::ConnectError::fatal("put on a source task")),
                }
            })
        }

        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sluice_plugin_flush(
            task: *mut ::std::ffi::c_void,
        ) -> $crate::native::Status {
            $crate::native::guard(|| {
                let task = unsafe { &mut *(task as *mut $crate::native::export::Task) };
                match task {
                    $crate::native::export::Task::Sink(t) => {
                        $crate::native::export::block_on(t.flush())
                    }
                    _ => Err($crate::ConnectError::fatal("flush on a source task")),
                }
            })
        }
    };
}

/// Exports a [`SourceConnector`](crate::SourceConnector) as a native plugin.
#[macro_export]
macro_rules! export_source_plugin {
    ($connector:expr) => {
        $crate::__export_plugin_common!($connector, $crate::SourceConnector);

        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sluice_plugin_open(
            config: *const u8,
            config_len: usize,
            context: *const u8,
            context_len: usize,
            offsets: *const u8,
            offsets_len: usize,
            out_task: *mut *mut ::std::ffi::c_void,
        ) -> $crate::native::Status {
            $crate::native::guard(|| {
                let config = $crate::native::parse_config(unsafe {
                    $crate::native::Buffer::borrow(config, config_len)
                })?;
                let context = $crate::native::__context(unsafe {
                    $crate::native::Buffer::borrow(context, context_len)
                })?;
                let offsets: $crate::SourceOffsets = ::serde_json::from_slice(unsafe {
                    $crate::native::Buffer::borrow(offsets, offsets_len)
                })
                .map_err(|e| $crate::ConnectError::fatal(format!("offsets: {e}")))?;
                let task =
                    $crate::SourceConnector::create_task(&$connector, &config, context, offsets)?;
                let boxed = Box::new($crate::native::export::Task::Source(task));
                unsafe { *out_task = Box::into_raw(boxed) as *mut ::std::ffi::c_void };
                Ok(())
            })
        }

        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sluice_plugin_poll(
            task: *mut ::std::ffi::c_void,
            out: *mut $crate::native::Buffer,
        ) -> $crate::native::Status {
            $crate::native::guard(|| {
                let task = unsafe { &mut *(task as *mut $crate::native::export::Task) };
                let polled = match task {
                    $crate::native::export::Task::Source(t) => {
                        $crate::native::export::block_on(t.poll())?
                    }
                    _ => return Err($crate::ConnectError::fatal("poll on a sink task")),
                };
                let bytes = match polled {
                    Some(records) => $crate::native::encode_source_batch(&records),
                    None => Vec::new(),
                };
                unsafe { *out = $crate::native::Buffer::from_vec(bytes) };
                Ok(())
            })
        }
    };
}

#[doc(hidden)]
pub fn __context(bytes: &[u8]) -> Result<crate::TaskContext, ConnectError> {
    let v: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| ConnectError::fatal(format!("task context: {e}")))?;
    Ok(crate::TaskContext {
        connector: v["connector"].as_str().unwrap_or_default().to_string(),
        task_id: v["task_id"].as_u64().unwrap_or(0) as u32,
        // ABI version 1 cannot return schemas: a native source gives its
        // bytes as always.
        key_schemas: false,
        value_schemas: false,
    })
}

#[doc(hidden)]
pub fn __metadata(info: crate::PluginInfo, config: serde_json::Value) -> Vec<u8> {
    serde_json::json!({
        "class": info.class,
        "aliases": info.aliases,
        "type": info.kind.as_str(),
        "version": info.version,
        "description": info.description,
        "config": config,
    })
    .to_string()
    .into_bytes()
}

#[doc(hidden)]
#[macro_export]
macro_rules! __export_plugin_common {
    ($connector:expr, $trait:path) => {
        #[unsafe(no_mangle)]
        pub extern "C" fn sluice_plugin_abi_version() -> u32 {
            $crate::native::ABI_VERSION
        }

        #[unsafe(no_mangle)]
        pub extern "C" fn sluice_plugin_metadata() -> $crate::native::Buffer {
            let info = ::std::panic::catch_unwind(|| {
                use $trait as _;
                $crate::native::__metadata(($connector).info(), ($connector).config_definition())
            });
            $crate::native::Buffer::from_vec(info.unwrap_or_default())
        }

        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sluice_plugin_validate(
            config: *const u8,
            len: usize,
        ) -> $crate::native::Status {
            $crate::native::guard(|| {
                let config = $crate::native::parse_config(unsafe {
                    $crate::native::Buffer::borrow(config, len)
                })?;
                use $trait as _;
                ($connector)
                    .validate(&config)
                    .map_err(|e| $crate::ConnectError::fatal(e.to_string()))
            })
        }

        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sluice_plugin_task_configs(
            config: *const u8,
            len: usize,
            max_tasks: u32,
            out: *mut $crate::native::Buffer,
        ) -> $crate::native::Status {
            $crate::native::guard(|| {
                let config = $crate::native::parse_config(unsafe {
                    $crate::native::Buffer::borrow(config, len)
                })?;
                use $trait as _;
                let configs = ($connector).task_configs(&config, max_tasks);
                unsafe {
                    *out = $crate::native::Buffer::from_vec(
                        ::serde_json::to_vec(&configs).expect("serialises"),
                    )
                };
                Ok(())
            })
        }

        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sluice_plugin_close(task: *mut ::std::ffi::c_void) {
            if task.is_null() {
                return;
            }
            let _ = ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| {
                let mut task = unsafe { Box::from_raw(task as *mut $crate::native::export::Task) };
                match task.as_mut() {
                    $crate::native::export::Task::Sink(t) => {
                        $crate::native::export::block_on(t.stop())
                    }
                    $crate::native::export::Task::Source(t) => {
                        $crate::native::export::block_on(t.stop())
                    }
                }
            }));
        }

        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sluice_plugin_free(buffer: $crate::native::Buffer) {
            drop(unsafe { buffer.into_vec() });
        }
    };
}
