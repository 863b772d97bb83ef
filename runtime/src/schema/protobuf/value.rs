//! Protobuf messages and Connect payloads (in `JsonConverter`'s envelope
//! form: a Decimal as base64 of its unscaled value, a Date in days, a
//! Time and a Timestamp in milliseconds), both ways, under the Connect
//! schema `super::to_connect` maps the message to (or the record's own).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{Datelike, NaiveDate};
use prost_reflect::{
    DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, ReflectMessage, Value,
};
use sluice_sdk::schema::{Logical, Schema, SchemaKind};

use super::super::decimal::{Decimal, Unscaled};
use super::super::json::{self, Json};
use super::{ENUM, UNION, is_entry, present};

const EPOCH: NaiveDate = NaiveDate::from_ymd_opt(1970, 1, 1).expect("the epoch");

/// A record's message as the payload of `schema`.
pub fn read(msg: &DynamicMessage, schema: &Schema) -> Result<Json, String> {
    if !matches!(schema.kind, SchemaKind::Struct(_)) {
        // A wrapper of a primitive: its `value`.
        let f = msg
            .descriptor()
            .get_field_by_name("value")
            .ok_or("a wrapper message has no `value`")?;
        return scalar(&msg.get_field(&f), &f, schema, "value");
    }
    read_message(msg, schema, &mut String::from("payload"))
}

fn read_message(msg: &DynamicMessage, schema: &Schema, at: &mut String) -> Result<Json, String> {
    let SchemaKind::Struct(fields) = &schema.kind else {
        return Err(format!(
            "{at}: a message read as a {}",
            schema.kind.type_name()
        ));
    };
    let desc = msg.descriptor();
    let mut members = Vec::with_capacity(fields.len());
    for field in fields {
        let len = at.len();
        at.push('.');
        at.push_str(&field.name);
        let v = if is_union(&field.schema) {
            read_union(msg, &field.schema, at)?
        } else {
            match desc.get_field_by_name(&field.name) {
                Some(f) if present(msg, &f) => {
                    field_value(&msg.get_field(&f), &f, &field.schema, at)?
                }
                Some(_) => Json::Null,
                None => {
                    return Err(format!(
                        "{at}: the message `{}` has no such field",
                        desc.full_name()
                    ));
                }
            }
        };
        at.truncate(len);
        members.push((field.name.clone(), v));
    }
    Ok(Json::Object(members))
}

fn is_union(s: &Schema) -> bool {
    matches!(s.kind, SchemaKind::Struct(_))
        && s.name.as_deref().is_some_and(|n| n.starts_with(UNION))
}

fn read_union(msg: &DynamicMessage, schema: &Schema, at: &mut String) -> Result<Json, String> {
    let SchemaKind::Struct(members) = &schema.kind else {
        unreachable!("a union is a struct")
    };
    let desc = msg.descriptor();
    let mut out = Vec::with_capacity(members.len());
    let mut any = false;
    for m in members {
        let f = desc
            .get_field_by_name(&m.name)
            .ok_or_else(|| format!("{at}: the message has no oneof member `{}`", m.name))?;
        let v = if msg.has_field(&f) {
            any = true;
            field_value(&msg.get_field(&f), &f, &m.schema, at)?
        } else {
            Json::Null
        };
        out.push((m.name.clone(), v));
    }
    Ok(if any { Json::Object(out) } else { Json::Null })
}

fn field_value(v: &Value, f: &FieldDescriptor, schema: &Schema, at: &str) -> Result<Json, String> {
    match (&schema.kind, v) {
        (SchemaKind::Array(items), Value::List(list)) => list
            .iter()
            .map(|e| element(e, f, items, at))
            .collect::<Result<_, _>>()
            .map(Json::Array),
        (SchemaKind::Map(keys, values), Value::List(entries)) => {
            let mut pairs = Vec::with_capacity(entries.len());
            for e in entries {
                let e = e
                    .as_message()
                    .ok_or_else(|| format!("{at}: a map entry is not a message"))?;
                let d = e.descriptor();
                let (kf, vf) = (
                    d.get_field_by_name("key").ok_or("an entry has a key")?,
                    d.get_field_by_name("value").ok_or("an entry has a value")?,
                );
                let key = if present(e, &kf) {
                    element(&e.get_field(&kf), &kf, keys, at)?
                } else {
                    Json::Null
                };
                let value = if present(e, &vf) {
                    element(&e.get_field(&vf), &vf, values, at)?
                } else {
                    Json::Null
                };
                pairs.push((key, value));
            }
            Ok(map_json(keys, pairs))
        }
        (SchemaKind::Map(keys, values), Value::Map(map)) => {
            let Kind::Message(entry) = f.kind() else {
                return Err(format!("{at}: a map field without an entry message"));
            };
            let (kf, vf) = (entry.map_entry_key_field(), entry.map_entry_value_field());
            let mut sorted: Vec<(&MapKey, &Value)> = map.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(b.0));
            let mut pairs = Vec::with_capacity(sorted.len());
            for (k, v) in sorted {
                let k: Value = k.clone().into();
                pairs.push((element(&k, &kf, keys, at)?, element(v, &vf, values, at)?));
            }
            Ok(map_json(keys, pairs))
        }
        _ => element(v, f, schema, at),
    }
}

/// A map in the envelope form: an object when its keys are strings, else
/// `[key, value]` pairs.
fn map_json(keys: &Schema, pairs: Vec<(Json, Json)>) -> Json {
    if matches!(keys.kind, SchemaKind::String)
        && pairs.iter().all(|(k, _)| matches!(k, Json::String(_)))
    {
        let mut members: Vec<(String, Json)> = Vec::with_capacity(pairs.len());
        for (k, v) in pairs {
            let Json::String(k) = k else {
                unreachable!("checked")
            };
            // A repeated key keeps its last value, as a protobuf map does.
            match members.iter_mut().find(|(m, _)| *m == k) {
                Some(slot) => slot.1 = v,
                None => members.push((k, v)),
            }
        }
        return Json::Object(members);
    }
    Json::Array(
        pairs
            .into_iter()
            .map(|(k, v)| Json::Array(vec![k, v]))
            .collect(),
    )
}

/// One value (not a list) of field `f`.
fn element(v: &Value, f: &FieldDescriptor, schema: &Schema, at: &str) -> Result<Json, String> {
    match v {
        Value::Message(m) => match schema.logical() {
            Some(logical) => logical_value(m, logical, at),
            None => {
                let mut at = at.to_string();
                read_message(m, schema, &mut at)
            }
        },
        other => scalar(other, f, schema, at),
    }
}

fn number(n: impl ToString) -> Json {
    Json::Number(n.to_string())
}

fn scalar(v: &Value, f: &FieldDescriptor, schema: &Schema, at: &str) -> Result<Json, String> {
    Ok(match v {
        Value::Bool(b) => Json::Bool(*b),
        Value::I32(n) => number(n),
        Value::I64(n) => number(n),
        Value::U32(n) => number(n),
        // Confluent reads uint64 into Java's long: past 2^63 it wraps.
        Value::U64(n) => number(*n as i64),
        Value::F32(x) if x.is_finite() => {
            let mut out = Vec::new();
            json::write_f32(&mut out, *x);
            Json::Number(String::from_utf8(out).expect("digits"))
        }
        Value::F64(x) if x.is_finite() => {
            let mut out = Vec::new();
            json::write_f64(&mut out, *x);
            Json::Number(String::from_utf8(out).expect("digits"))
        }
        Value::F32(_) | Value::F64(_) => {
            return Err(format!(
                "{at}: {v:?} has no value in a Connect payload (JSON has no NaN or infinity)"
            ));
        }
        Value::String(s) => Json::String(s.clone()),
        Value::Bytes(b) => Json::String(BASE64.encode(b)),
        Value::EnumNumber(n) => {
            let Kind::Enum(e) = f.kind() else {
                return Err(format!(
                    "{at}: an enum number on a field that is not an enum"
                ));
            };
            match e.get_value(*n) {
                Some(symbol) => Json::String(symbol.name().to_string()),
                None if matches!(schema.kind, SchemaKind::Int32) => number(n),
                None => {
                    return Err(format!(
                        "{at}: {n} is not a value of enum `{}`",
                        e.full_name()
                    ));
                }
            }
        }
        Value::Message(_) | Value::List(_) | Value::Map(_) => {
            return Err(format!(
                "{at}: a {} where the schema has a scalar",
                kind_name(v)
            ));
        }
    })
}

fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::Message(_) => "message",
        Value::List(_) => "repeated field",
        Value::Map(_) => "map",
        _ => "scalar",
    }
}

fn int_field(m: &DynamicMessage, name: &str) -> i64 {
    match m.get_field_by_name(name).as_deref() {
        Some(Value::I32(n)) => i64::from(*n),
        Some(Value::I64(n)) => *n,
        Some(Value::U32(n)) => i64::from(*n),
        _ => 0,
    }
}

fn logical_value(m: &DynamicMessage, logical: Logical, at: &str) -> Result<Json, String> {
    Ok(match logical {
        Logical::Decimal { scale } => {
            let Some(Value::Bytes(b)) = m.get_field_by_name("value").as_deref().cloned() else {
                return Err(format!("{at}: a Decimal message without `value` bytes"));
            };
            let own_scale = int_field(m, "scale") as i32;
            let unscaled = if b.is_empty() {
                Unscaled {
                    negative: false,
                    digits: String::new(),
                }
            } else {
                Unscaled::from_twos_complement(&b)
                    .ok_or_else(|| format!("{at}: the Decimal's value is not an integer"))?
            };
            let unscaled = if own_scale == scale {
                unscaled
            } else {
                Decimal::parse(&unscaled.plain(own_scale))
                    .ok_or_else(|| format!("{at}: the Decimal's value is not a number"))?
                    .unscaled(scale)
                    .map_err(|e| {
                        format!(
                            "{at}: the Decimal at scale {own_scale} does not fit scale {scale}: {e}"
                        )
                    })?
            };
            Json::String(BASE64.encode(unscaled.to_twos_complement()))
        }
        Logical::Date => {
            let (y, mo, d) = (
                int_field(m, "year"),
                int_field(m, "month"),
                int_field(m, "day"),
            );
            let date = NaiveDate::from_ymd_opt(y as i32, mo as u32, d as u32)
                .ok_or_else(|| format!("{at}: {y}-{mo}-{d} is not a date"))?;
            number((date - EPOCH).num_days())
        }
        Logical::Time => {
            let ms = int_field(m, "hours") * 3_600_000
                + int_field(m, "minutes") * 60_000
                + int_field(m, "seconds") * 1000
                + int_field(m, "nanos") / 1_000_000;
            if !(0..86_400_000).contains(&ms) {
                return Err(format!("{at}: a TimeOfDay of {ms} ms is not within a day"));
            }
            number(ms)
        }
        Logical::Timestamp => {
            let ms = int_field(m, "seconds")
                .checked_mul(1000)
                .and_then(|s| s.checked_add(int_field(m, "nanos") / 1_000_000))
                .ok_or_else(|| format!("{at}: the Timestamp is out of range"))?;
            number(ms)
        }
    })
}

/// The record's message of descriptor `desc` for a payload of `schema`.
pub fn write(
    desc: &MessageDescriptor,
    schema: &Schema,
    payload: &Json,
) -> Result<DynamicMessage, String> {
    let mut msg = DynamicMessage::new(desc.clone());
    if !matches!(schema.kind, SchemaKind::Struct(_)) {
        let f = desc
            .get_field_by_name("value")
            .ok_or("a wrapper message has no `value`")?;
        if !matches!(payload, Json::Null) {
            msg.set_field(&f, to_value(payload, &f, schema, "payload")?);
        }
        return Ok(msg);
    }
    write_message(&mut msg, schema, payload, &mut String::from("payload"))?;
    Ok(msg)
}

fn write_message(
    msg: &mut DynamicMessage,
    schema: &Schema,
    v: &Json,
    at: &mut String,
) -> Result<(), String> {
    let (SchemaKind::Struct(fields), Json::Object(members)) = (&schema.kind, v) else {
        return Err(format!("{at}: {} where a struct was expected", v.kind()));
    };
    let desc = msg.descriptor();
    for field in fields {
        let Some(value) = members
            .iter()
            .find(|(k, _)| *k == field.name)
            .map(|(_, v)| v)
        else {
            continue;
        };
        if matches!(value, Json::Null) {
            continue;
        }
        let len = at.len();
        at.push('.');
        at.push_str(&field.name);
        if is_union(&field.schema) {
            let (SchemaKind::Struct(union), Json::Object(set)) = (&field.schema.kind, value) else {
                return Err(format!(
                    "{at}: a oneof's value is {}, not a struct",
                    value.kind()
                ));
            };
            for m in union {
                if let Some((_, v)) = set
                    .iter()
                    .find(|(k, v)| *k == m.name && !matches!(v, Json::Null))
                {
                    let f = desc.get_field_by_name(&m.name).ok_or_else(|| {
                        format!("{at}: the message has no oneof member `{}`", m.name)
                    })?;
                    msg.set_field(&f, to_value(v, &f, &m.schema, at)?);
                }
            }
        } else {
            let f = desc.get_field_by_name(&field.name).ok_or_else(|| {
                format!(
                    "{at}: the schema's message `{}` has no such field",
                    desc.full_name()
                )
            })?;
            let value = field_to_value(value, &f, &field.schema, at)?;
            msg.set_field(&f, value);
        }
        at.truncate(len);
    }
    Ok(())
}

fn field_to_value(
    v: &Json,
    f: &FieldDescriptor,
    schema: &Schema,
    at: &str,
) -> Result<Value, String> {
    match (&schema.kind, v) {
        (SchemaKind::Array(items), Json::Array(list)) => list
            .iter()
            .map(|e| to_value(e, f, items, at))
            .collect::<Result<_, _>>()
            .map(Value::List),
        (SchemaKind::Map(keys, values), _) => {
            let pairs: Vec<(Json, &Json)> = match v {
                Json::Object(members) => members
                    .iter()
                    .map(|(k, v)| (Json::String(k.clone()), v))
                    .collect(),
                Json::Array(entries) => entries
                    .iter()
                    .map(|e| match e {
                        Json::Array(kv) if kv.len() == 2 => Ok((kv[0].clone(), &kv[1])),
                        _ => Err(format!("{at}: a map entry is not a [key, value] pair")),
                    })
                    .collect::<Result<_, _>>()?,
                other => return Err(format!("{at}: {} where a map was expected", other.kind())),
            };
            let Kind::Message(entry) = f.kind() else {
                return Err(format!(
                    "{at}: the schema's field `{}` is not a map",
                    f.name()
                ));
            };
            let (kf, vf) = (
                entry.get_field_by_name("key").ok_or("an entry has a key")?,
                entry
                    .get_field_by_name("value")
                    .ok_or("an entry has a value")?,
            );
            if f.is_map() {
                let mut map = std::collections::HashMap::with_capacity(pairs.len());
                for (k, v) in pairs {
                    let key = to_value(&k, &kf, keys, at)?
                        .into_map_key()
                        .ok_or_else(|| format!("{at}: a map key of this type"))?;
                    if !matches!(v, Json::Null) {
                        map.insert(key, to_value(v, &vf, values, at)?);
                    }
                }
                return Ok(Value::Map(map));
            }
            let mut list = Vec::with_capacity(pairs.len());
            for (k, v) in pairs {
                let mut e = DynamicMessage::new(entry.clone());
                if !matches!(k, Json::Null) {
                    e.set_field(&kf, to_value(&k, &kf, keys, at)?);
                }
                if !matches!(v, Json::Null) {
                    e.set_field(&vf, to_value(v, &vf, values, at)?);
                }
                list.push(Value::Message(e));
            }
            Ok(Value::List(list))
        }
        _ => to_value(v, f, schema, at),
    }
}

/// One value (not a list) for field `f`.
fn to_value(v: &Json, f: &FieldDescriptor, schema: &Schema, at: &str) -> Result<Value, String> {
    let mismatch = || {
        format!(
            "{at}: {} does not fit the field `{}` ({:?})",
            v.kind(),
            f.name(),
            f.kind()
        )
    };
    if let Kind::Message(m) = f.kind() {
        if let Some(logical) = schema.logical() {
            return logical_message(&m, logical, v, at).map(Value::Message);
        }
        if is_entry(&m) && !f.is_list() {
            return Err(mismatch());
        }
        let mut msg = DynamicMessage::new(m);
        let mut at = at.to_string();
        write_message(&mut msg, schema, v, &mut at)?;
        return Ok(Value::Message(msg));
    }
    let int = |n: &str| -> Result<i128, String> {
        n.parse::<i128>()
            .map_err(|_| format!("{at}: {n} is not an integer"))
    };
    let ranged = |n: &str, lo: i128, hi: i128| -> Result<i128, String> {
        let x = int(n)?;
        if (lo..=hi).contains(&x) {
            Ok(x)
        } else {
            Err(format!(
                "{at}: {n} is out of the range of field `{}` ({:?})",
                f.name(),
                f.kind()
            ))
        }
    };
    Ok(match (f.kind(), v) {
        (Kind::Bool, Json::Bool(b)) => Value::Bool(*b),
        (Kind::Int32 | Kind::Sint32 | Kind::Sfixed32, Json::Number(n)) => {
            Value::I32(ranged(n, i32::MIN.into(), i32::MAX.into())? as i32)
        }
        (Kind::Int64 | Kind::Sint64 | Kind::Sfixed64, Json::Number(n)) => {
            Value::I64(ranged(n, i64::MIN.into(), i64::MAX.into())? as i64)
        }
        (Kind::Uint32 | Kind::Fixed32, Json::Number(n)) => {
            Value::U32(ranged(n, 0, u32::MAX.into())? as u32)
        }
        // A long past 2^63 was read wrapped: written back as it was.
        (Kind::Uint64 | Kind::Fixed64, Json::Number(n)) => {
            Value::U64(ranged(n, i64::MIN.into(), u64::MAX.into())? as i64 as u64)
        }
        (Kind::Float, Json::Number(n)) => Value::F32(n.parse().map_err(|_| mismatch())?),
        (Kind::Double, Json::Number(n)) => Value::F64(n.parse().map_err(|_| mismatch())?),
        (Kind::String, Json::String(s)) => Value::String(s.clone()),
        (Kind::Bytes, Json::String(s)) => Value::Bytes(
            BASE64
                .decode(s)
                .map_err(|e| format!("{at}: bytes that are not base64: {e}"))?
                .into(),
        ),
        (Kind::Enum(e), Json::String(s)) => Value::EnumNumber(
            e.get_value_by_name(s)
                .ok_or_else(|| {
                    let symbols: Vec<_> = e.values().map(|v| v.name().to_string()).collect();
                    format!(
                        "{at}: `{s}` is not a symbol of enum `{}` ({})",
                        e.full_name(),
                        symbols.join(", ")
                    )
                })?
                .number(),
        ),
        (Kind::Enum(_), Json::Number(n)) if schema.parameter(ENUM).is_some() => {
            Value::EnumNumber(ranged(n, i32::MIN.into(), i32::MAX.into())? as i32)
        }
        _ => return Err(mismatch()),
    })
}

fn logical_message(
    m: &MessageDescriptor,
    logical: Logical,
    v: &Json,
    at: &str,
) -> Result<DynamicMessage, String> {
    let mut msg = DynamicMessage::new(m.clone());
    let set = |msg: &mut DynamicMessage, name: &str, value: Value| -> Result<(), String> {
        let f = m
            .get_field_by_name(name)
            .ok_or_else(|| format!("{at}: message `{}` has no field `{name}`", m.full_name()))?;
        msg.try_set_field(&f, value)
            .map_err(|e| format!("{at}: message `{}` field `{name}`: {e}", m.full_name()))
    };
    let Json::Number(n) = v else {
        if let (Logical::Decimal { scale }, Json::String(b64)) = (logical, v) {
            let bytes = BASE64
                .decode(b64)
                .map_err(|e| format!("{at}: a Decimal that is not base64: {e}"))?;
            let unscaled = Unscaled::from_twos_complement(&bytes)
                .ok_or_else(|| format!("{at}: a Decimal without bytes"))?;
            let precision = unscaled.digits.len().max(1) as u32;
            set(&mut msg, "value", Value::Bytes(bytes.into()))?;
            set(&mut msg, "precision", Value::U32(precision))?;
            set(&mut msg, "scale", Value::I32(scale))?;
            return Ok(msg);
        }
        return Err(format!(
            "{at}: {} where a {logical:?} was expected",
            v.kind()
        ));
    };
    let n: i64 = n
        .parse()
        .map_err(|_| format!("{at}: {n} is not an integer"))?;
    match logical {
        Logical::Date => {
            let date = EPOCH
                .checked_add_signed(chrono::Duration::days(n))
                .ok_or_else(|| format!("{at}: {n} days is out of range"))?;
            set(&mut msg, "year", Value::I32(date.year()))?;
            set(&mut msg, "month", Value::I32(date.month() as i32))?;
            set(&mut msg, "day", Value::I32(date.day() as i32))?;
        }
        Logical::Time => {
            if !(0..86_400_000).contains(&n) {
                return Err(format!("{at}: a Time of {n} ms is not within a day"));
            }
            set(&mut msg, "hours", Value::I32((n / 3_600_000) as i32))?;
            set(&mut msg, "minutes", Value::I32((n / 60_000 % 60) as i32))?;
            set(&mut msg, "seconds", Value::I32((n / 1000 % 60) as i32))?;
            set(&mut msg, "nanos", Value::I32((n % 1000 * 1_000_000) as i32))?;
        }
        Logical::Timestamp => {
            set(&mut msg, "seconds", Value::I64(n.div_euclid(1000)))?;
            set(
                &mut msg,
                "nanos",
                Value::I32((n.rem_euclid(1000) * 1_000_000) as i32),
            )?;
        }
        Logical::Decimal { .. } => {
            return Err(format!(
                "{at}: a number where a Decimal's base64 was expected"
            ));
        }
    }
    Ok(msg)
}
