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
        let key = match std::str::from_utf8(key_bytes) {
            Ok(key) => key.to_string(),
            Err(_) => {
                let bytes: Vec<String> = key_bytes.iter().map(|b| format!("{b:02x}")).collect();
                problem.get_or_insert_with(|| {
                    ConnectError::data(format!(
                        "header {idx} has a key that is not UTF-8 (bytes {})",
                        bytes.join(" ")
                    ))
                    .with_class("InvalidHeaderKey")
                });
                String::from_utf8_lossy(key_bytes).into_owned()
            }
        };
        // SAFETY: see above.
        let value = (!value.is_null())
            .then(|| unsafe { std::slice::from_raw_parts(value.cast::<u8>(), size) }.to_vec());
        out.push(Header { key, value });
    }
    (out, problem)
}
