//! Reading a consumed message's headers without trusting them: Kafka
//! allows any bytes as a header key, rdkafka's accessor panics on one that
//! is not UTF-8.

use rdkafka::message::BorrowedMessage;
use sluice_sdk::{ConnectError, Header};

/// The message's headers, read through librdkafka's C API: rdkafka's own
/// accessor panics on a key that is not UTF-8, which Kafka allows. Such a
/// key is kept made valid (U+FFFD for what is not UTF-8) and reported, for
/// the header converter stage to fail the record by `errors.tolerance`.
pub fn read_headers(m: &BorrowedMessage<'_>) -> (Vec<Header>, Option<ConnectError>) {
    use rdkafka::bindings as rd;
    let mut headers: *mut rd::rd_kafka_headers_t = std::ptr::null_mut();
    // SAFETY: the message, and the headers it owns, outlive this function.
    let found = unsafe { rd::rd_kafka_message_headers(m.ptr(), &mut headers) };
    if found != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || headers.is_null() {
        return (Vec::new(), None);
    }
    // SAFETY: `headers` is the message's, valid while it is.
    let count = unsafe { rd::rd_kafka_header_cnt(headers) };
    let mut out = Vec::with_capacity(count);
    let mut problem = None;
    for idx in 0..count {
        let (mut name, mut value, mut size) = (std::ptr::null(), std::ptr::null(), 0usize);
        // SAFETY: as above; librdkafka points name at a NUL-terminated
        // string and value at `size` bytes (or null), both the message's.
        let got =
            unsafe { rd::rd_kafka_header_get_all(headers, idx, &mut name, &mut value, &mut size) };
        if got != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || name.is_null() {
            break;
        }
        // SAFETY: see above.
        let key_bytes = unsafe { std::ffi::CStr::from_ptr(name) }.to_bytes();
        // SAFETY: see above.
        let value = (!value.is_null())
            .then(|| unsafe { std::slice::from_raw_parts(value.cast::<u8>(), size) });
        let (header, bad_key) = decode_header(idx, key_bytes, value);
        if let Some(e) = bad_key {
            problem.get_or_insert(e);
        }
        out.push(header);
    }
    (out, problem)
}

/// Header `idx` from its raw key and value: a key that is not UTF-8 is
/// made valid (U+FFFD) and reported. Public for the fuzz targets (`fuzz/`).
#[doc(hidden)]
pub fn decode_header(
    idx: usize,
    key_bytes: &[u8],
    value: Option<&[u8]>,
) -> (Header, Option<ConnectError>) {
    let (key, problem) = match std::str::from_utf8(key_bytes) {
        Ok(key) => (key.to_string(), None),
        Err(_) => {
            let bytes: Vec<String> = key_bytes.iter().map(|b| format!("{b:02x}")).collect();
            let problem = ConnectError::data(format!(
                "header {idx} has a key that is not UTF-8 (bytes {})",
                bytes.join(" ")
            ))
            .with_class("InvalidHeaderKey");
            (
                String::from_utf8_lossy(key_bytes).into_owned(),
                Some(problem),
            )
        }
    };
    let header = Header {
        key,
        value: value.map(<[u8]>::to_vec),
    };
    (header, problem)
}
