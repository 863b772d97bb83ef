//! The field, routing and header transforms.

use regex::Regex;
use serde_json::{Map, Number, Value};
use sluice_sdk::{ConnectError, Record};

use crate::{Keys, Part, Smt, object, read, type_name, write};

/// Kafka Connect lets field names end in `!` (required) or `?` (optional).
fn field_name(raw: String) -> String {
    raw.trim_end_matches(['!', '?']).to_string()
}

/// A dotted path into nested objects.
fn get_path<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(v, |cur, seg| cur.as_object()?.get(seg))
}

pub struct InsertField {
    part: Part,
    topic: Option<String>,
    partition: Option<String>,
    offset: Option<String>,
    timestamp: Option<String>,
    static_field: Option<(String, String)>,
}

impl InsertField {
    pub fn new(part: Part, k: &mut Keys) -> Result<Self, ConnectError> {
        let static_field = match (k.take("static.field"), k.take("static.value")) {
            (Some(f), Some(v)) => Some((field_name(f), v)),
            (None, None) => None,
            (Some(_), None) => return Err(k.bad("static.value", "is required with static.field")),
            (None, Some(_)) => return Err(k.bad("static.field", "is required with static.value")),
        };
        let s = Self {
            part,
            topic: k.take("topic.field").map(field_name),
            partition: k.take("partition.field").map(field_name),
            offset: k.take("offset.field").map(field_name),
            timestamp: k.take("timestamp.field").map(field_name),
            static_field,
        };
        if s.topic.is_none()
            && s.partition.is_none()
            && s.offset.is_none()
            && s.timestamp.is_none()
            && s.static_field.is_none()
        {
            return Err(k.bad("topic.field", "InsertField needs at least one of topic.field, partition.field, offset.field, timestamp.field, static.field"));
        }
        Ok(s)
    }
}

impl Smt for InsertField {
    fn apply(&self, mut record: Record) -> Result<Vec<Record>, ConnectError> {
        let Some(mut m) = object(&record, self.part, "InsertField")? else {
            return Ok(vec![record]);
        };
        let known = |n: i64| if n < 0 { Value::Null } else { Value::from(n) };
        if let Some(f) = &self.topic {
            m.insert(f.clone(), Value::from(record.topic.clone()));
        }
        if let Some(f) = &self.partition {
            m.insert(f.clone(), known(record.partition.into()));
        }
        if let Some(f) = &self.offset {
            m.insert(f.clone(), known(record.offset));
        }
        // As Kafka Connect: no field at all for a record without a timestamp.
        if let (Some(f), Some(ts)) = (&self.timestamp, record.timestamp) {
            m.insert(f.clone(), Value::from(ts));
        }
        if let Some((f, v)) = &self.static_field {
            m.insert(f.clone(), Value::from(v.clone()));
        }
        write(&mut record, self.part, &Value::Object(m));
        Ok(vec![record])
    }
}

pub struct ReplaceField {
    part: Part,
    include: Vec<String>,
    exclude: Vec<String>,
    renames: Vec<(String, String)>,
}

impl ReplaceField {
    pub fn new(part: Part, k: &mut Keys) -> Result<Self, ConnectError> {
        let mut include = k.list("include");
        include.extend(k.list("whitelist"));
        let mut exclude = k.list("exclude");
        exclude.extend(k.list("blacklist"));
        let mut renames = Vec::new();
        for pair in k.list("renames") {
            let (from, to) = pair
                .split_once(':')
                .ok_or_else(|| k.bad("renames", format!("`{pair}` is not old:new")))?;
            renames.push((from.to_string(), to.to_string()));
        }
        Ok(Self {
            part,
            include,
            exclude,
            renames,
        })
    }
}

impl Smt for ReplaceField {
    fn apply(&self, mut record: Record) -> Result<Vec<Record>, ConnectError> {
        let Some(m) = object(&record, self.part, "ReplaceField")? else {
            return Ok(vec![record]);
        };
        let mut out = Map::with_capacity(m.len());
        for (name, v) in m {
            if self.exclude.contains(&name)
                || (!self.include.is_empty() && !self.include.contains(&name))
            {
                continue;
            }
            let name = self
                .renames
                .iter()
                .find(|(from, _)| *from == name)
                .map(|(_, to)| to.clone())
                .unwrap_or(name);
            out.insert(name, v);
        }
        write(&mut record, self.part, &Value::Object(out));
        Ok(vec![record])
    }
}

pub struct MaskField {
    part: Part,
    fields: Vec<String>,
    replacement: Option<String>,
}

impl MaskField {
    pub fn new(part: Part, k: &mut Keys) -> Result<Self, ConnectError> {
        let fields = k.list("fields");
        if fields.is_empty() {
            return Err(k.bad("fields", "is required: the fields to mask"));
        }
        Ok(Self {
            part,
            fields,
            replacement: k.take("replacement"),
        })
    }
}

impl Smt for MaskField {
    fn apply(&self, mut record: Record) -> Result<Vec<Record>, ConnectError> {
        let Some(mut m) = object(&record, self.part, "MaskField")? else {
            return Ok(vec![record]);
        };
        for f in &self.fields {
            // As Kafka Connect: a masked field that is missing is set to null.
            let v = m.entry(f.clone()).or_insert(Value::Null);
            *v = match (&*v, &self.replacement) {
                (Value::Null, _) => Value::Null,
                (Value::String(_), Some(r)) => Value::from(r.clone()),
                // The replacement takes the number's type: 9 for an
                // integer, 9.0 for a floating-point number.
                (Value::Number(n), Some(r)) => masked_number(n, r).ok_or_else(|| {
                    ConnectError::data(format!(
                        "MaskField: replacement `{r}` is not a number of the type of field `{f}` ({n})"
                    ))
                })?,
                (Value::String(_), None) => Value::from(""),
                (Value::Number(n), None) if n.is_f64() => Value::from(0.0),
                (Value::Number(_), None) => Value::from(0),
                (other, Some(_)) => {
                    return Err(ConnectError::data(format!(
                        "MaskField: field `{f}` is {}, which a custom replacement cannot mask (only strings and numbers)",
                        type_name(other)
                    )));
                }
                (Value::Bool(_), None) => Value::Bool(false),
                (Value::Array(_), None) => Value::Array(vec![]),
                (Value::Object(_), None) => Value::Object(Map::new()),
            };
        }
        write(&mut record, self.part, &Value::Object(m));
        Ok(vec![record])
    }
}

/// `replacement` as a number of `n`'s kind (integer or floating-point).
fn masked_number(n: &Number, replacement: &str) -> Option<Value> {
    let r = replacement.trim();
    if n.is_f64() {
        r.parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(Value::from)
    } else {
        r.parse::<i64>().ok().map(Value::from)
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Gte,
    Lt,
    Lte,
    Exists,
    Missing,
    Matches,
}

/// Drops records. Without a condition it drops every record, as Kafka
/// Connect's `Filter` (used with a predicate); with `field`, `operator` and
/// `value` it drops the records whose value matches.
pub struct Filter {
    condition: Option<(String, Op, Option<String>, Option<Regex>)>,
}

impl Filter {
    pub fn new(k: &mut Keys) -> Result<Self, ConnectError> {
        let Some(field) = k.take("field") else {
            if k.take("operator").is_some() || k.take("value").is_some() {
                return Err(k.bad("field", "is required with operator and value"));
            }
            return Ok(Self { condition: None });
        };
        let op_text = k.take("operator").unwrap_or_else(|| "eq".into());
        let op =
            match op_text.as_str() {
                "eq" => Op::Eq,
                "ne" => Op::Ne,
                "gt" => Op::Gt,
                "gte" => Op::Gte,
                "lt" => Op::Lt,
                "lte" => Op::Lte,
                "exists" => Op::Exists,
                "missing" => Op::Missing,
                "matches" => Op::Matches,
                other => return Err(k.bad(
                    "operator",
                    format!(
                        "`{other}`; expected eq, ne, gt, gte, lt, lte, exists, missing or matches"
                    ),
                )),
            };
        let value = k.take("value");
        if value.is_none() && !matches!(op, Op::Exists | Op::Missing) {
            return Err(k.bad("value", format!("is required with operator `{op_text}`")));
        }
        let regex = if op == Op::Matches {
            let v = value.clone().unwrap_or_default();
            Some(
                Regex::new(&format!("^(?:{v})$"))
                    .map_err(|e| k.bad("value", format!("is not a regular expression: {e}")))?,
            )
        } else {
            None
        };
        Ok(Self {
            condition: Some((field, op, value, regex)),
        })
    }

    fn matches(&self, v: Option<&Value>) -> bool {
        let Some((_, op, expected, regex)) = &self.condition else {
            return true;
        };
        let Some(v) = v.filter(|v| !v.is_null()) else {
            return *op == Op::Missing || *op == Op::Ne;
        };
        let expected = expected.as_deref().unwrap_or_default();
        let as_text = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let ordering = match (v.as_f64(), expected.parse::<f64>()) {
            (Some(a), Ok(b)) => a.partial_cmp(&b),
            _ => Some(as_text.as_str().cmp(expected)),
        };
        use std::cmp::Ordering::*;
        match op {
            Op::Exists => true,
            Op::Missing => false,
            Op::Eq => ordering == Some(Equal),
            Op::Ne => ordering != Some(Equal),
            Op::Gt => ordering == Some(Greater),
            Op::Gte => matches!(ordering, Some(Greater | Equal)),
            Op::Lt => ordering == Some(Less),
            Op::Lte => matches!(ordering, Some(Less | Equal)),
            Op::Matches => regex.as_ref().is_some_and(|r| r.is_match(&as_text)),
        }
    }
}

impl Smt for Filter {
    fn apply(&self, record: Record) -> Result<Vec<Record>, ConnectError> {
        let Some((field, ..)) = &self.condition else {
            return Ok(vec![]);
        };
        let value = read(&record, Part::Value)?;
        let drop = self.matches(value.as_ref().and_then(|v| get_path(v, field)));
        Ok(if drop { vec![] } else { vec![record] })
    }
}

#[derive(Clone, Copy, Debug)]
enum CastType {
    Int(i64, i64),
    Float,
    Bool,
    Str,
}

fn cast_type(name: &str) -> Option<CastType> {
    Some(match name {
        "int8" => CastType::Int(i8::MIN.into(), i8::MAX.into()),
        "int16" => CastType::Int(i16::MIN.into(), i16::MAX.into()),
        "int32" => CastType::Int(i32::MIN.into(), i32::MAX.into()),
        "int64" => CastType::Int(i64::MIN, i64::MAX),
        "float32" | "float64" => CastType::Float,
        "boolean" => CastType::Bool,
        "string" => CastType::Str,
        _ => return None,
    })
}

fn cast(v: &Value, to: CastType, what: &str) -> Result<Value, ConnectError> {
    let fail = || {
        ConnectError::data(format!(
            "Cast: cannot cast {what} ({}) to {to:?}",
            type_name(v)
        ))
    };
    Ok(match (v, to) {
        (Value::Null, _) => Value::Null,
        // As Kafka Connect: only primitives cast, to any type.
        (Value::Object(_) | Value::Array(_), _) => return Err(fail()),
        (_, CastType::Str) => match v {
            Value::String(s) => Value::from(s.clone()),
            other => Value::from(other.to_string()),
        },
        (Value::Bool(b), CastType::Int(..)) => Value::from(i64::from(*b)),
        (Value::Bool(b), CastType::Float) => Value::from(if *b { 1.0 } else { 0.0 }),
        (Value::Bool(b), CastType::Bool) => Value::Bool(*b),
        (Value::Number(n), CastType::Int(lo, hi)) => {
            let i = n
                .as_i64()
                .or_else(|| n.as_f64().map(|f| f.trunc() as i64))
                .ok_or_else(fail)?;
            if i < lo || i > hi {
                return Err(ConnectError::data(format!(
                    "Cast: {what} = {i} is out of range for {to:?}"
                )));
            }
            Value::from(i)
        }
        (Value::Number(n), CastType::Float) => Value::from(n.as_f64().ok_or_else(fail)?),
        (Value::Number(n), CastType::Bool) => Value::Bool(n.as_f64().ok_or_else(fail)? != 0.0),
        (Value::String(s), CastType::Int(..)) => {
            let i: i64 = s.trim().parse().map_err(|_| fail())?;
            cast(&Value::from(i), to, what)?
        }
        (Value::String(s), CastType::Float) => {
            Value::from(s.trim().parse::<f64>().map_err(|_| fail())?)
        }
        (Value::String(s), CastType::Bool) => match s.trim().to_ascii_lowercase().as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => return Err(fail()),
        },
    })
}

pub struct Cast {
    part: Part,
    whole: Option<CastType>,
    fields: Vec<(String, CastType)>,
}

impl Cast {
    pub fn new(part: Part, k: &mut Keys) -> Result<Self, ConnectError> {
        let spec = k.list("spec");
        if spec.is_empty() {
            return Err(k.bad(
                "spec",
                "is required: field:type pairs, or one type for the whole part",
            ));
        }
        let unknown = |k: &Keys, t: &str| {
            k.bad("spec", format!("`{t}` is not a type; expected int8, int16, int32, int64, float32, float64, boolean or string"))
        };
        if spec.len() == 1 && !spec[0].contains(':') {
            let t = cast_type(&spec[0]).ok_or_else(|| unknown(k, &spec[0]))?;
            return Ok(Self {
                part,
                whole: Some(t),
                fields: vec![],
            });
        }
        let mut fields = Vec::new();
        for s in spec {
            let (f, t) = s
                .split_once(':')
                .ok_or_else(|| k.bad("spec", format!("`{s}` is not field:type")))?;
            fields.push((f.to_string(), cast_type(t).ok_or_else(|| unknown(k, t))?));
        }
        Ok(Self {
            part,
            whole: None,
            fields,
        })
    }
}

impl Smt for Cast {
    fn apply(&self, mut record: Record) -> Result<Vec<Record>, ConnectError> {
        if let Some(t) = self.whole {
            let Some(v) = read(&record, self.part)? else {
                return Ok(vec![record]);
            };
            let out = cast(&v, t, "the whole value")?;
            write(&mut record, self.part, &out);
            return Ok(vec![record]);
        }
        let Some(mut m) = object(&record, self.part, "Cast")? else {
            return Ok(vec![record]);
        };
        for (f, t) in &self.fields {
            // As Kafka Connect: a field to cast that is missing is set to null.
            let v = m.entry(f.clone()).or_insert(Value::Null);
            *v = cast(v, *t, &format!("field `{f}`"))?;
        }
        write(&mut record, self.part, &Value::Object(m));
        Ok(vec![record])
    }
}

pub struct ExtractField {
    part: Part,
    field: String,
    nested: bool,
}

impl ExtractField {
    pub fn new(part: Part, k: &mut Keys) -> Result<Self, ConnectError> {
        let field = k.required("field")?;
        let nested = match k.take("field.syntax.version").as_deref() {
            None | Some("V1") => false,
            Some("V2") => true,
            Some(other) => {
                return Err(k.bad(
                    "field.syntax.version",
                    format!("`{other}`; expected V1 or V2"),
                ));
            }
        };
        Ok(Self {
            part,
            field,
            nested,
        })
    }
}

impl Smt for ExtractField {
    fn apply(&self, mut record: Record) -> Result<Vec<Record>, ConnectError> {
        let Some(v) = read(&record, self.part)? else {
            return Ok(vec![record]);
        };
        let extracted = if self.nested {
            get_path(&v, &self.field)
        } else {
            v.get(&self.field)
        };
        let extracted = extracted.cloned().unwrap_or(Value::Null);
        if !v.is_object() {
            return Err(ConnectError::data(format!(
                "ExtractField needs a JSON object, got {}",
                type_name(&v)
            )));
        }
        // A null (or missing) field makes a null key or value, as Kafka
        // Connect's converters write it: a tombstone, not the text `null`.
        if extracted.is_null() {
            match self.part {
                Part::Key => record.key = None,
                Part::Value => record.value = None,
            }
        } else {
            write(&mut record, self.part, &extracted);
        }
        Ok(vec![record])
    }
}

pub struct ValueToKey {
    fields: Vec<String>,
}

impl ValueToKey {
    pub fn new(k: &mut Keys) -> Result<Self, ConnectError> {
        let fields = k.list("fields");
        if fields.is_empty() {
            return Err(k.bad("fields", "is required: the value fields that form the key"));
        }
        Ok(Self { fields })
    }
}

impl Smt for ValueToKey {
    fn apply(&self, mut record: Record) -> Result<Vec<Record>, ConnectError> {
        let Some(m) = object(&record, Part::Value, "ValueToKey")? else {
            return Ok(vec![record]);
        };
        let key: Map<String, Value> = self
            .fields
            .iter()
            .map(|f| (f.clone(), m.get(f).cloned().unwrap_or(Value::Null)))
            .collect();
        write(&mut record, Part::Key, &Value::Object(key));
        Ok(vec![record])
    }
}

pub struct HoistField {
    part: Part,
    field: String,
}

impl HoistField {
    pub fn new(part: Part, k: &mut Keys) -> Result<Self, ConnectError> {
        Ok(Self {
            part,
            field: k.required("field")?,
        })
    }
}

impl Smt for HoistField {
    fn apply(&self, mut record: Record) -> Result<Vec<Record>, ConnectError> {
        let v = read(&record, self.part)?.unwrap_or(Value::Null);
        let mut m = Map::new();
        m.insert(self.field.clone(), v);
        write(&mut record, self.part, &Value::Object(m));
        Ok(vec![record])
    }
}

pub struct RegexRouter {
    regex: Regex,
    replacement: String,
}

impl RegexRouter {
    pub fn new(k: &mut Keys) -> Result<Self, ConnectError> {
        let pattern = k.required("regex")?;
        let regex = Regex::new(&format!("^(?:{pattern})$"))
            .map_err(|e| k.bad("regex", format!("is not a regular expression: {e}")))?;
        let java = k.required("replacement")?;
        // Java's `$1abc` is group 1 then `abc`; in Rust's syntax that is `${1}abc`.
        let replacement = Regex::new(r"\$(\d+)")
            .expect("valid")
            .replace_all(&java, "$${$1}")
            .into_owned();
        Ok(Self { regex, replacement })
    }
}

impl Smt for RegexRouter {
    fn apply(&self, mut record: Record) -> Result<Vec<Record>, ConnectError> {
        if self.regex.is_match(&record.topic) {
            record.topic = self
                .regex
                .replace(&record.topic, self.replacement.as_str())
                .into_owned();
        }
        Ok(vec![record])
    }
}

pub struct InsertHeader {
    header: String,
    value: Vec<u8>,
}

impl InsertHeader {
    pub fn new(k: &mut Keys) -> Result<Self, ConnectError> {
        Ok(Self {
            header: k.required("header")?,
            value: k.required("value.literal")?.into_bytes(),
        })
    }
}

impl Smt for InsertHeader {
    fn apply(&self, mut record: Record) -> Result<Vec<Record>, ConnectError> {
        record.add_header(self.header.clone(), Some(self.value.clone()));
        Ok(vec![record])
    }
}

pub struct HeaderFrom {
    part: Part,
    pairs: Vec<(String, String)>,
    move_fields: bool,
}

impl HeaderFrom {
    pub fn new(part: Part, k: &mut Keys) -> Result<Self, ConnectError> {
        let fields = k.list("fields");
        let headers = k.list("headers");
        if fields.is_empty() || fields.len() != headers.len() {
            return Err(k.bad("headers", "needs as many names as `fields` (at least one)"));
        }
        let move_fields = match k.required("operation")?.as_str() {
            "copy" => false,
            "move" => true,
            other => return Err(k.bad("operation", format!("`{other}`; expected copy or move"))),
        };
        Ok(Self {
            part,
            pairs: fields.into_iter().zip(headers).collect(),
            move_fields,
        })
    }
}

impl Smt for HeaderFrom {
    fn apply(&self, mut record: Record) -> Result<Vec<Record>, ConnectError> {
        let Some(mut m) = object(&record, self.part, "HeaderFrom")? else {
            return Ok(vec![record]);
        };
        for (field, header) in &self.pairs {
            let v = if self.move_fields {
                m.remove(field)
            } else {
                m.get(field).cloned()
            };
            let bytes = match v {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.into_bytes()),
                Some(other) => Some(other.to_string().into_bytes()),
            };
            record.add_header(header.clone(), bytes);
        }
        if self.move_fields {
            write(&mut record, self.part, &Value::Object(m));
        }
        Ok(vec![record])
    }
}

/// Stamps the time a record entered the pipeline, as 8-byte big-endian
/// milliseconds, unless the header is already there (so the first stamp,
/// closest to the origin, wins).
pub struct LatencyStamp {
    header: String,
}

pub const LATENCY_HEADER: &str = "x-produce-timestamp-ms";

impl LatencyStamp {
    pub fn new(k: &mut Keys) -> Result<Self, ConnectError> {
        Ok(Self {
            header: k.take("header").unwrap_or_else(|| LATENCY_HEADER.into()),
        })
    }
}

impl Smt for LatencyStamp {
    fn apply(&self, mut record: Record) -> Result<Vec<Record>, ConnectError> {
        if !record.has_header(&self.header) {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0);
            record.add_header(self.header.clone(), Some(now.to_be_bytes().to_vec()));
        }
        Ok(vec![record])
    }
}

/// Kafka Connect's `Flatten`: nested objects become top-level fields whose
/// names join the path with `delimiter` (default `.`). Arrays, nulls and
/// other values are kept as they are; an empty nested object leaves nothing.
pub struct Flatten {
    part: Part,
    delimiter: String,
}

impl Flatten {
    pub fn new(part: Part, k: &mut Keys) -> Result<Self, ConnectError> {
        Ok(Self {
            part,
            delimiter: k.take("delimiter").unwrap_or_else(|| ".".into()),
        })
    }

    fn flatten_into(&self, prefix: &str, m: Map<String, Value>, out: &mut Map<String, Value>) {
        for (name, v) in m {
            let name = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}{}{name}", self.delimiter)
            };
            match v {
                Value::Object(nested) => self.flatten_into(&name, nested, out),
                other => {
                    out.insert(name, other);
                }
            }
        }
    }
}

impl Smt for Flatten {
    fn apply(&self, mut record: Record) -> Result<Vec<Record>, ConnectError> {
        let Some(m) = object(&record, self.part, "Flatten")? else {
            return Ok(vec![record]);
        };
        let mut out = Map::with_capacity(m.len());
        self.flatten_into("", m, &mut out);
        write(&mut record, self.part, &Value::Object(out));
        Ok(vec![record])
    }
}

/// Kafka Connect's `DropHeaders`: removes every header with one of the keys.
pub struct DropHeaders {
    headers: Vec<String>,
}

impl DropHeaders {
    pub fn new(k: &mut Keys) -> Result<Self, ConnectError> {
        let headers = k.list("headers");
        if headers.is_empty() {
            return Err(k.bad("headers", "is required: the header keys to remove"));
        }
        Ok(Self { headers })
    }
}

impl Smt for DropHeaders {
    fn apply(&self, mut record: Record) -> Result<Vec<Record>, ConnectError> {
        record.headers.retain(|h| !self.headers.contains(&h.key));
        Ok(vec![record])
    }
}
