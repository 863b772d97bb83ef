//! The byte encoding of the `bytes` world (`sdk/wit/transform.wit`), for
//! languages without a component binding generator. Version 1.
//!
//! Every buffer starts with the version byte `0x01`. Integers are
//! little-endian. `str` and `bytes` are a `u32` length then the data;
//! `opt<T>` is a byte `0` (none) or `1` followed by `T`.
//!
//! ```text
//! batch    := 0x01 u32:count record*
//! record   := str:topic i32:partition i64:offset opt<i64>:timestamp
//!             opt<bytes>:key opt<bytes>:value u32:count header*
//! header   := str:key opt<bytes>:value
//! results  := 0x01 u32:count result*           (one per input record, in order)
//! result   := 0x00 u32:count record*            (ok: zero, one or many records)
//!           | 0x01 u8:class str:message         (error: 0 data, 1 retriable, 2 fatal)
//! config   := 0x01 u32:count (str:key str:value)*
//! status   := 0x01 0x00                         (configure succeeded)
//!           | 0x01 0x01 u8:class str:message    (configure failed)
//! ```

use crate::error::{ConnectError, ErrorKind};
use crate::record::{Header, Record};

pub const VERSION: u8 = 1;

/// A buffer that does not follow the encoding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed transform buffer at byte {at}: {what}")]
pub struct DecodeError {
    pub at: usize,
    pub what: String,
}

pub struct Writer(Vec<u8>);

impl Writer {
    pub fn new() -> Self {
        Writer(vec![VERSION])
    }
    /// A writer whose buffer holds `bytes` before it grows.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut buf = Vec::with_capacity(bytes.max(1));
        buf.push(VERSION);
        Writer(buf)
    }
    #[inline]
    pub fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    #[inline]
    pub fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    #[inline]
    pub fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    #[inline]
    pub fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    #[inline]
    pub fn bytes(&mut self, v: &[u8]) {
        self.u32(u32::try_from(v.len()).expect("a field under 4 GiB"));
        self.0.extend_from_slice(v);
    }
    #[inline]
    pub fn opt_bytes(&mut self, v: Option<&[u8]>) {
        match v {
            None => self.u8(0),
            Some(b) => {
                self.u8(1);
                self.bytes(b);
            }
        }
    }
    pub fn record(&mut self, r: &Record) {
        self.bytes(r.topic.as_bytes());
        self.i32(r.partition);
        self.i64(r.offset);
        match r.timestamp {
            None => self.u8(0),
            Some(t) => {
                self.u8(1);
                self.i64(t);
            }
        }
        self.opt_bytes(r.key.as_deref());
        self.opt_bytes(r.value.as_deref());
        self.u32(r.headers.len() as u32);
        for h in &r.headers {
            self.bytes(h.key.as_bytes());
            self.opt_bytes(h.value.as_deref());
        }
    }
    fn error(&mut self, e: &ConnectError) {
        self.u8(class_code(e.kind));
        self.bytes(e.full_message().as_bytes());
    }
    /// One input's result: its records, or its error.
    pub fn result(&mut self, result: &TransformResult) {
        match result {
            Ok(records) => {
                self.u8(0);
                self.u32(records.len() as u32);
                for r in records {
                    self.record(r);
                }
            }
            Err(e) => {
                self.u8(1);
                self.error(e);
            }
        }
    }
    pub fn finish(self) -> Vec<u8> {
        self.0
    }
}

impl Default for Writer {
    fn default() -> Self {
        Self::new()
    }
}

pub struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader { buf, at: 0 };
        let v = r.u8()?;
        if v != VERSION {
            return Err(DecodeError {
                at: 0,
                what: format!("encoding version {v}, expected {VERSION}"),
            });
        }
        Ok(r)
    }
    #[inline(always)]
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        match self.buf[self.at..].get(..n) {
            Some(taken) => {
                self.at += n;
                Ok(taken)
            }
            None => Err(self.too_short(n)),
        }
    }

    #[cold]
    #[inline(never)]
    fn too_short(&self, n: usize) -> DecodeError {
        DecodeError {
            at: self.at,
            what: format!("needs {n} more bytes, {} left", self.buf.len() - self.at),
        }
    }

    #[inline(always)]
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    #[inline(always)]
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    #[inline(always)]
    pub fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    #[inline(always)]
    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    #[inline(always)]
    pub fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    #[inline]
    pub fn string(&mut self) -> Result<String, DecodeError> {
        let at = self.at;
        let b = self.bytes()?;
        Ok(utf8(b, at)?.to_owned())
    }
    #[cold]
    #[inline(never)]
    fn bad_flag(&self, tag: u8) -> DecodeError {
        DecodeError {
            at: self.at - 1,
            what: format!("option tag {tag}, expected 0 or 1"),
        }
    }

    #[inline(always)]
    fn flag(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(self.bad_flag(other)),
        }
    }
    #[inline]
    pub fn opt_bytes(&mut self) -> Result<Option<Vec<u8>>, DecodeError> {
        Ok(if self.flag()? {
            Some(self.bytes()?.to_vec())
        } else {
            None
        })
    }
    pub fn record(&mut self) -> Result<Record, DecodeError> {
        self.record_reusing(None)
    }

    /// A record, taking from `old` each field (topic, key, value) whose
    /// bytes are the same instead of allocating a copy: a transform returns
    /// most of its input unchanged.
    pub fn record_reusing(&mut self, mut old: Option<&mut Record>) -> Result<Record, DecodeError> {
        let at = self.at;
        let raw = self.bytes()?;
        let topic = match old.as_deref_mut() {
            Some(old) if old.topic.as_bytes() == raw => std::mem::take(&mut old.topic),
            _ => utf8(raw, at)?.to_owned(),
        };
        let partition = self.i32()?;
        let offset = self.i64()?;
        let timestamp = if self.flag()? {
            Some(self.i64()?)
        } else {
            None
        };
        let key = self.opt_bytes_reusing(old.as_deref_mut().map(|r| &mut r.key))?;
        let value = self.opt_bytes_reusing(old.map(|r| &mut r.value))?;
        let n = self.u32()? as usize;
        let mut headers = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            headers.push(Header {
                key: self.string()?,
                value: self.opt_bytes()?,
            });
        }
        Ok(Record {
            topic,
            partition,
            offset,
            timestamp,
            key,
            value,
            headers,
            key_schema: None,
            value_schema: None,
        })
    }

    #[inline]
    fn opt_bytes_reusing(
        &mut self,
        old: Option<&mut Option<Vec<u8>>>,
    ) -> Result<Option<Vec<u8>>, DecodeError> {
        if !self.flag()? {
            return Ok(None);
        }
        let raw = self.bytes()?;
        Ok(match old {
            Some(old) if old.as_deref() == Some(raw) => old.take(),
            _ => Some(raw.to_vec()),
        })
    }

    /// Steps over a string, checking it is UTF-8.
    fn skip_string(&mut self) -> Result<(), DecodeError> {
        let at = self.at;
        utf8(self.bytes()?, at).map(|_| ())
    }

    fn skip_opt_bytes(&mut self) -> Result<(), DecodeError> {
        if self.flag()? {
            self.bytes()?;
        }
        Ok(())
    }

    /// Steps over a record, checking everything [`Reader::record`] checks.
    fn skip_record(&mut self) -> Result<(), DecodeError> {
        self.skip_string()?;
        self.take(4 + 8)?;
        if self.flag()? {
            self.take(8)?;
        }
        self.skip_opt_bytes()?;
        self.skip_opt_bytes()?;
        for _ in 0..self.u32()? {
            self.skip_string()?;
            self.skip_opt_bytes()?;
        }
        Ok(())
    }

    fn error(&mut self) -> Result<ConnectError, DecodeError> {
        let kind = self.error_class()?;
        Ok(ConnectError::new(kind, self.string()?))
    }

    fn error_class(&mut self) -> Result<ErrorKind, DecodeError> {
        let at = self.at;
        match self.u8()? {
            0 => Ok(ErrorKind::Data),
            1 => Ok(ErrorKind::Retriable),
            2 => Ok(ErrorKind::Fatal),
            other => Err(DecodeError {
                at,
                what: format!("error class {other}, expected 0 (data), 1 (retriable) or 2 (fatal)"),
            }),
        }
    }

    /// One result's tag: `true` for records, `false` for an error.
    fn result_tag(&mut self) -> Result<bool, DecodeError> {
        let at = self.at;
        match self.u8()? {
            0 => Ok(true),
            1 => Ok(false),
            other => Err(DecodeError {
                at,
                what: format!("result tag {other}, expected 0 (ok) or 1 (error)"),
            }),
        }
    }

    pub fn end(&self) -> Result<(), DecodeError> {
        if self.at == self.buf.len() {
            Ok(())
        } else {
            Err(DecodeError {
                at: self.at,
                what: format!("{} unexpected trailing bytes", self.buf.len() - self.at),
            })
        }
    }
}

fn utf8(raw: &[u8], at: usize) -> Result<&str, DecodeError> {
    std::str::from_utf8(raw).map_err(|_| DecodeError {
        at,
        what: "a string is not UTF-8".into(),
    })
}

fn class_code(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::Data => 0,
        ErrorKind::Retriable => 1,
        ErrorKind::Fatal => 2,
    }
}

/// The encoded size of a record, so a batch's buffer is allocated once.
fn encoded_len(r: &Record) -> usize {
    let opt = |b: Option<&[u8]>| 1 + b.map_or(0, |b| 4 + b.len());
    4 + r.topic.len()
        + 4
        + 8
        + if r.timestamp.is_some() { 9 } else { 1 }
        + opt(r.key.as_deref())
        + opt(r.value.as_deref())
        + 4
        + r.headers
            .iter()
            .map(|h| 4 + h.key.len() + opt(h.value.as_deref()))
            .sum::<usize>()
}

pub fn encode_batch(records: &[Record]) -> Vec<u8> {
    let mut w = Writer::with_capacity(5 + records.iter().map(encoded_len).sum::<usize>());
    w.u32(records.len() as u32);
    for r in records {
        w.record(r);
    }
    w.finish()
}

pub fn decode_batch(buf: &[u8]) -> Result<Vec<Record>, DecodeError> {
    let mut r = Reader::new(buf)?;
    let n = r.u32()? as usize;
    let mut out = Vec::with_capacity(n.min(65_536));
    for _ in 0..n {
        out.push(r.record()?);
    }
    r.end()?;
    Ok(out)
}

pub type TransformResult = Result<Vec<Record>, ConnectError>;

pub fn encode_results(results: &[TransformResult]) -> Vec<u8> {
    let mut w = Writer::new();
    w.u32(results.len() as u32);
    for result in results {
        w.result(result);
    }
    w.finish()
}

pub fn decode_results(buf: &[u8]) -> Result<Vec<TransformResult>, DecodeError> {
    decode_results_for(buf, &mut [])
}

/// Checks a results buffer whole without decoding it: every length in
/// bounds, every tag known, every string UTF-8. Returns how many results
/// it holds.
pub fn check_results(buf: &[u8]) -> Result<usize, DecodeError> {
    let mut r = Reader::new(buf)?;
    let n = r.u32()? as usize;
    for _ in 0..n {
        if r.result_tag()? {
            for _ in 0..r.u32()? {
                r.skip_record()?;
            }
        } else {
            r.error_class()?;
            r.skip_string()?;
        }
    }
    r.end()?;
    Ok(n)
}

/// The results of a batch of `inputs`. The first record of result `i`
/// takes input `i`'s topic, key and value where they are unchanged, rather
/// than copying them. The buffer is checked whole first, so when it is
/// malformed the inputs are left as they were (to be replayed).
pub fn decode_results_for(
    buf: &[u8],
    inputs: &mut [Record],
) -> Result<Vec<TransformResult>, DecodeError> {
    let n = check_results(buf)?;
    let mut r = Reader::new(buf)?;
    r.u32()?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        if r.result_tag()? {
            let m = r.u32()? as usize;
            let mut records = Vec::with_capacity(m);
            let mut reuse = inputs.get_mut(i);
            for _ in 0..m {
                records.push(r.record_reusing(reuse.take())?);
            }
            out.push(Ok(records));
        } else {
            out.push(Err(r.error()?));
        }
    }
    r.end()?;
    Ok(out)
}

pub fn encode_config(config: &[(String, String)]) -> Vec<u8> {
    let mut w = Writer::new();
    w.u32(config.len() as u32);
    for (k, v) in config {
        w.bytes(k.as_bytes());
        w.bytes(v.as_bytes());
    }
    w.finish()
}

pub fn decode_config(buf: &[u8]) -> Result<Vec<(String, String)>, DecodeError> {
    let mut r = Reader::new(buf)?;
    let n = r.u32()? as usize;
    let mut out = Vec::with_capacity(n.min(4096));
    for _ in 0..n {
        out.push((r.string()?, r.string()?));
    }
    r.end()?;
    Ok(out)
}

pub fn encode_status(status: &Result<(), ConnectError>) -> Vec<u8> {
    let mut w = Writer::new();
    match status {
        Ok(()) => w.u8(0),
        Err(e) => {
            w.u8(1);
            w.error(e);
        }
    }
    w.finish()
}

pub fn decode_status(buf: &[u8]) -> Result<Result<(), ConnectError>, DecodeError> {
    let mut r = Reader::new(buf)?;
    let at = r.at;
    let status = match r.u8()? {
        0 => Ok(()),
        1 => Err(r.error()?),
        other => {
            return Err(DecodeError {
                at,
                what: format!("status tag {other}, expected 0 or 1"),
            });
        }
    };
    r.end()?;
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Record {
        Record {
            topic: "orders".into(),
            partition: 2,
            offset: 41,
            timestamp: Some(1_700_000_000_000),
            key: Some(b"k".to_vec()),
            value: None,
            headers: vec![
                Header {
                    key: "a".into(),
                    value: Some(b"1".to_vec()),
                },
                Header {
                    key: "a".into(),
                    value: None,
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn round_trips() {
        let batch = vec![sample(), Record::default()];
        assert_eq!(decode_batch(&encode_batch(&batch)).unwrap(), batch);
        let results = vec![
            Ok(vec![sample(), sample()]),
            Ok(vec![]),
            Err(ConnectError::retriable("later")),
        ];
        let back = decode_results(&encode_results(&results)).unwrap();
        assert_eq!(back[0].as_ref().unwrap().len(), 2);
        assert!(back[1].as_ref().unwrap().is_empty());
        let e = back[2].as_ref().unwrap_err();
        assert_eq!(
            (e.kind, e.message.as_str()),
            (ErrorKind::Retriable, "later")
        );
        let config = vec![("k".to_string(), "v".to_string())];
        assert_eq!(decode_config(&encode_config(&config)).unwrap(), config);
        assert!(decode_status(&encode_status(&Ok(()))).unwrap().is_ok());
    }

    #[test]
    fn a_batch_is_encoded_into_one_allocation_of_its_exact_size() {
        let mut value = sample();
        value.value = Some(b"{}".to_vec());
        value.timestamp = None;
        let batch = vec![sample(), Record::default(), value];
        let encoded = encode_batch(&batch);
        assert_eq!(encoded.capacity(), encoded.len());
    }

    #[test]
    fn the_layout_is_the_documented_one() {
        let r = Record {
            topic: "t".into(),
            partition: 1,
            offset: 2,
            ..Default::default()
        };
        let bytes = encode_batch(&[r]);
        let expected: Vec<u8> = [
            &[1u8][..],          // version
            &1u32.to_le_bytes(), // count
            &1u32.to_le_bytes(),
            b"t",                // topic
            &1i32.to_le_bytes(), // partition
            &2i64.to_le_bytes(), // offset
            &[0, 0, 0],          // no timestamp, key, value
            &0u32.to_le_bytes(), // no headers
        ]
        .concat();
        assert_eq!(bytes, expected);
    }

    #[test]
    fn results_take_the_unchanged_fields_of_their_input() {
        let mut changed = sample();
        changed.value = Some(b"new".to_vec());
        let results = vec![
            Ok(vec![changed.clone(), changed.clone()]),
            Ok(vec![sample()]),
        ];
        let buf = encode_results(&results);
        let mut inputs = vec![sample(), sample()];
        let key_buffer = inputs[0].key.as_ref().unwrap().as_ptr();
        let topic_buffer = inputs[1].topic.as_ptr();
        let back = decode_results_for(&buf, &mut inputs).unwrap();
        let first = back[0].as_ref().unwrap();
        assert_eq!(first, &vec![changed.clone(), changed]);
        assert_eq!(
            first[0].key.as_ref().unwrap().as_ptr(),
            key_buffer,
            "the key moved"
        );
        assert!(inputs[0].key.is_none(), "taken from the input");
        assert_eq!(back[1].as_ref().unwrap()[0].topic.as_ptr(), topic_buffer);
        assert_eq!(back[1].as_ref().unwrap(), &vec![sample()]);
    }

    #[test]
    fn a_malformed_results_buffer_leaves_the_inputs_whole() {
        let good = encode_results(&[Ok(vec![sample()]), Ok(vec![sample()])]);
        for cut in 0..good.len() {
            let mut inputs = vec![sample(), sample()];
            assert!(decode_results_for(&good[..cut], &mut inputs).is_err());
            assert_eq!(inputs, vec![sample(), sample()], "cut at {cut}");
        }
        // A bad string in the second result, after a first one that reuses.
        let mut bad_utf8 = sample();
        bad_utf8.headers[0].key = "\u{e9}".into();
        let mut buf = encode_results(&[Ok(vec![sample()]), Ok(vec![bad_utf8])]);
        let e9 = buf.iter().rposition(|b| *b == 0xa9).unwrap();
        buf[e9] = 0xff;
        let mut inputs = vec![sample(), sample()];
        let err = decode_results_for(&buf, &mut inputs).unwrap_err();
        assert!(err.what.contains("UTF-8"), "{err}");
        assert_eq!(inputs, vec![sample(), sample()]);
    }

    #[test]
    fn malformed_buffers_are_errors_not_panics() {
        let good = encode_batch(&[sample()]);
        for cut in 0..good.len() {
            assert!(decode_batch(&good[..cut]).is_err());
        }
        let err = decode_batch(&[2, 0, 0, 0, 0]).unwrap_err();
        assert!(err.what.contains("version 2"), "{err}");
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(
            decode_batch(&trailing)
                .unwrap_err()
                .what
                .contains("trailing")
        );
        assert!(
            decode_results(&[1, 1, 0, 0, 0, 7])
                .unwrap_err()
                .what
                .contains("result tag 7")
        );
    }
}
