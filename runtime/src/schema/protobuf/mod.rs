//! Protobuf schemas and Kafka Connect's, mapped both ways as Confluent's
//! `ProtobufData` maps them in its default configuration.
//!
//! Protobuf to Connect (reading):
//! - a message is a struct named by the message's simple name; every
//!   field is optional (proto3 has no required fields) and carries its
//!   field number in the parameter `io.confluent.connect.protobuf.Tag`;
//! - the fields of each oneof come first, as one optional struct named
//!   `io.confluent.connect.protobuf.Union.<oneof>` in a field
//!   `<oneof>_<index>`;
//! - `int32` is int32 (int8 or int16 where the field's
//!   `(confluent.field_meta)` says `connect.type`), `int64` int64;
//!   `sint32` and `sfixed32` int32, and the unsigned, `sint64` and fixed
//!   64-bit types int64, each with its type in
//!   `io.confluent.connect.protobuf.Type`;
//! - an enum is a string of its symbols, listed in parameters;
//! - `repeated` is an array; a `map<K, V>`, or a repeated message
//!   `XEntry` of only `key` and `value`, is a map;
//! - `confluent.type.Decimal`, `google.type.Date`, `google.type.TimeOfDay`
//!   and `google.protobuf.Timestamp` are Connect's Decimal, Date, Time and
//!   Timestamp; a `google.protobuf.*Value` wrapper as the whole record is
//!   its primitive.
//!
//! Connect to Protobuf (writing) is the inverse: a struct named `a.b.C` is
//! `package a.b; message C` in proto3 (unnamed: `ConnectDefault1`, and
//! so on), fields numbered in order unless a Tag parameter says otherwise,
//! arrays and maps `repeated` (a map as repeated `XEntry` messages), nested
//! structs nested messages, and a primitive record a wrapper.
//!
//! Values follow proto3: an unset scalar reads as its default (0, "",
//! false), an unset message as null, and a null is written as unset.

pub mod compat;
pub mod compile;
pub mod value;

use std::collections::HashSet;

use prost_reflect::{Cardinality, DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, Value};
use sluice_sdk::schema::{DATE, DECIMAL, DECIMAL_SCALE, Schema, SchemaKind, TIME, TIMESTAMP};

/// Confluent's parameter of a field's number.
pub const TAG: &str = "io.confluent.connect.protobuf.Tag";
/// Confluent's parameter of a field's Protobuf type where Connect's is
/// wider (`uint32`, `sint64`, ...).
pub const TYPE: &str = "io.confluent.connect.protobuf.Type";
/// Confluent's parameter naming an enum (and, suffixed with `.SYMBOL`,
/// each symbol's number).
pub const ENUM: &str = "io.confluent.connect.protobuf.Enum";
/// The name prefix of a oneof's struct.
pub const UNION: &str = "io.confluent.connect.protobuf.Union";
/// A decimal's precision, as Confluent's converters carry it.
pub const DECIMAL_PRECISION: &str = "connect.decimal.precision";

const DECIMAL_MESSAGE: &str = "confluent.type.Decimal";
const DATE_MESSAGE: &str = "google.type.Date";
const TIME_MESSAGE: &str = "google.type.TimeOfDay";
const TIMESTAMP_MESSAGE: &str = "google.protobuf.Timestamp";

/// The Connect schema of the record message `m`; `full_names`
/// (`enhanced.protobuf.schema.support`) names structs and enums by their
/// full names, package included.
pub fn to_connect(m: &MessageDescriptor, full_names: bool) -> Result<Schema, String> {
    if let Some(primitive) = wrapped_primitive(m) {
        return Ok(primitive.optional());
    }
    let mut within = Within {
        names: Vec::new(),
        full_names,
    };
    message_schema(m, &mut within)
}

/// The messages being mapped (a message inside itself has no Connect
/// form) and how types are named.
struct Within {
    names: Vec<String>,
    full_names: bool,
}

/// The primitive a `google.protobuf.*Value` wrapper holds.
pub(crate) fn wrapped_primitive(m: &MessageDescriptor) -> Option<Schema> {
    Some(match m.full_name() {
        "google.protobuf.Int32Value" => Schema::int32(),
        "google.protobuf.UInt32Value"
        | "google.protobuf.Int64Value"
        | "google.protobuf.UInt64Value" => Schema::int64(),
        "google.protobuf.FloatValue" => Schema::float32(),
        "google.protobuf.DoubleValue" => Schema::float64(),
        "google.protobuf.BoolValue" => Schema::boolean(),
        "google.protobuf.StringValue" => Schema::string(),
        "google.protobuf.BytesValue" => Schema::bytes(),
        _ => return None,
    })
}

fn message_schema(m: &MessageDescriptor, within: &mut Within) -> Result<Schema, String> {
    if within.names.iter().any(|n| n == m.full_name()) {
        return Err(format!(
            "message `{}` contains itself, and a Connect schema cannot",
            m.full_name()
        ));
    }
    within.names.push(m.full_name().to_string());
    let mut fields = Vec::new();
    for (i, oneof) in m.oneofs().enumerate() {
        if oneof.is_synthetic() {
            continue;
        }
        let mut members = Vec::new();
        for f in oneof.fields() {
            members.push((f.name().to_string(), field_schema(&f, within)?));
        }
        let union = Schema::structure(members)
            .named(format!("{UNION}.{}", oneof.name()))
            .optional();
        fields.push((format!("{}_{i}", oneof.name()), union));
    }
    for f in m.fields() {
        if f.containing_oneof().is_some_and(|o| !o.is_synthetic()) {
            continue;
        }
        fields.push((f.name().to_string(), field_schema(&f, within)?));
    }
    within.names.pop();
    let name = if within.full_names {
        m.full_name()
    } else {
        m.name()
    };
    Ok(Schema::structure(fields).named(name))
}

/// A repeated message that Confluent's converters read as a map entry.
pub(crate) fn is_entry(m: &MessageDescriptor) -> bool {
    m.is_map_entry()
        || (m.name().ends_with("Entry")
            && m.fields().len() == 2
            && m.get_field_by_name("key").is_some()
            && m.get_field_by_name("value").is_some())
}

fn with_tag(mut s: Schema, number: u32) -> Schema {
    s.parameters.push((TAG.to_string(), number.to_string()));
    s.optional()
}

fn field_schema(f: &FieldDescriptor, within: &mut Within) -> Result<Schema, String> {
    let entry = match f.kind() {
        Kind::Message(m) if f.is_list() && is_entry(&m) => Some(m),
        Kind::Message(m) if f.is_map() => Some(m),
        _ => None,
    };
    let schema = if let Some(entry) = entry {
        let key = entry.get_field_by_name("key").expect("an entry has a key");
        let value = entry
            .get_field_by_name("value")
            .expect("an entry has a value");
        let mut map = Schema::map(
            with_tag(kind_schema(&key, within)?, key.number()),
            with_tag(kind_schema(&value, within)?, value.number()),
        );
        map.name = Some(map_field_name(entry.name()));
        map
    } else if f.is_list() {
        Schema::array(kind_schema(f, within)?.optional())
    } else {
        kind_schema(f, within)?
    };
    Ok(with_tag(schema, f.number()))
}

/// Confluent's `toMapField`: `MapTypeEntry` is `map_type`.
fn map_field_name(entry: &str) -> String {
    let base = entry.strip_suffix("Entry").unwrap_or(entry);
    let mut out = String::new();
    for (i, c) in base.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The params of a field's `(confluent.field_meta)` option.
pub(crate) fn field_meta(f: &FieldDescriptor) -> Vec<(String, String)> {
    let options = f.options();
    let Some(ext) = f
        .parent_pool()
        .get_extension_by_name("confluent.field_meta")
    else {
        return Vec::new();
    };
    if !options.has_extension(&ext) {
        return Vec::new();
    }
    let meta = options.get_extension(&ext);
    let Some(meta) = meta.as_message() else {
        return Vec::new();
    };
    let Some(params) = meta.get_field_by_name("params") else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = match &*params {
        Value::Map(m) => m
            .iter()
            .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.as_str()?.to_string())))
            .collect(),
        Value::List(entries) => entries
            .iter()
            .filter_map(|e| {
                let e = e.as_message()?;
                Some((
                    e.get_field_by_name("key")?.as_str()?.to_string(),
                    e.get_field_by_name("value")?.as_str()?.to_string(),
                ))
            })
            .collect(),
        _ => Vec::new(),
    };
    out.sort();
    out
}

fn meta_param(f: &FieldDescriptor, key: &str) -> Option<String> {
    field_meta(f)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

/// The schema of one value of field `f` (an element, for a repeated one).
fn kind_schema(f: &FieldDescriptor, within: &mut Within) -> Result<Schema, String> {
    let typed = |s: Schema, t: &str| {
        let mut s = s;
        s.parameters.push((TYPE.to_string(), t.to_string()));
        s
    };
    Ok(match f.kind() {
        Kind::Double => Schema::float64(),
        Kind::Float => Schema::float32(),
        Kind::Int32 => match meta_param(f, "connect.type").as_deref() {
            Some("int8") => Schema::int8(),
            Some("int16") => Schema::int16(),
            _ => Schema::int32(),
        },
        Kind::Sint32 => typed(Schema::int32(), "sint32"),
        Kind::Sfixed32 => typed(Schema::int32(), "sfixed32"),
        Kind::Int64 => Schema::int64(),
        Kind::Uint32 => typed(Schema::int64(), "uint32"),
        Kind::Fixed32 => typed(Schema::int64(), "fixed32"),
        Kind::Uint64 => typed(Schema::int64(), "uint64"),
        Kind::Sint64 => typed(Schema::int64(), "sint64"),
        Kind::Fixed64 => typed(Schema::int64(), "fixed64"),
        Kind::Sfixed64 => typed(Schema::int64(), "sfixed64"),
        Kind::Bool => Schema::boolean(),
        Kind::String => Schema::string(),
        Kind::Bytes => Schema::bytes(),
        Kind::Enum(e) => {
            let mut s = Schema::string().named(if within.full_names {
                e.full_name()
            } else {
                e.name()
            });
            s.parameters.push((ENUM.to_string(), e.name().to_string()));
            for v in e.values() {
                s.parameters
                    .push((format!("{ENUM}.{}", v.name()), v.number().to_string()));
            }
            s
        }
        Kind::Message(m) => match m.full_name() {
            DECIMAL_MESSAGE => {
                let scale = match meta_param(f, "scale") {
                    None => 0,
                    Some(s) => s.parse::<i32>().map_err(|_| {
                        format!(
                            "field `{}` has a decimal scale `{s}` that is not an integer",
                            f.full_name()
                        )
                    })?,
                };
                let mut s = Schema::decimal(scale);
                if let Some(p) = meta_param(f, "precision") {
                    s.parameters.push((DECIMAL_PRECISION.to_string(), p));
                }
                s
            }
            DATE_MESSAGE => Schema::date(),
            TIME_MESSAGE => Schema::time(),
            TIMESTAMP_MESSAGE => Schema::timestamp(),
            _ => message_schema(&m, within)?,
        },
    })
}

/// Whether `f` reads as null when unset (a message, or a scalar with
/// explicit presence: proto3 `optional`, proto2 `optional`).
pub(crate) fn null_when_unset(f: &FieldDescriptor) -> bool {
    !f.is_list() && !f.is_map() && f.supports_presence()
}

/// A `.proto` schema for a Connect schema, and the message indexes of
/// the record's message in it: Confluent's `fromConnectSchema`.
pub fn from_connect(schema: &Schema) -> Result<(String, Vec<i32>), String> {
    if let Some(wrapper) = wrapper_of(schema)? {
        return Ok(wrapper);
    }
    let SchemaKind::Struct(_) = &schema.kind else {
        return Err(format!(
            "ProtobufConverter writes a struct or a primitive as the record, and this one is {} (Confluent's converter refuses it too)",
            schema.kind.type_name()
        ));
    };
    let mut writer = TextWriter::default();
    let full = writer.name_or_default(schema.name.as_deref());
    let (package, name) = match full.rsplit_once('.') {
        Some((p, n)) => (Some(p.to_string()), n.to_string()),
        None => (None, full.clone()),
    };
    let body = writer.message(&name, schema, 0)?;
    let mut text = String::from("syntax = \"proto3\";\n");
    if let Some(p) = package {
        text.push_str(&format!("package {p};\n"));
    }
    if !writer.imports.is_empty() {
        text.push('\n');
        for i in &writer.imports {
            text.push_str(&format!("import \"{i}\";\n"));
        }
    }
    text.push('\n');
    text.push_str(&body);
    Ok((text, vec![0]))
}

/// A primitive record's schema: Google's `wrappers.proto`, as a
/// descriptor, and the index of its wrapper.
fn wrapper_of(schema: &Schema) -> Result<Option<(String, Vec<i32>)>, String> {
    use base64::Engine as _;
    use prost::Message as _;
    if schema.name.is_some() && schema.logical().is_some() {
        return Err(format!(
            "ProtobufConverter writes a logical type ({}) only as a field of a struct",
            schema.name.as_deref().unwrap_or_default()
        ));
    }
    let wrapper = match schema.kind {
        SchemaKind::Int8 | SchemaKind::Int16 | SchemaKind::Int32 => "Int32Value",
        SchemaKind::Int64 => "Int64Value",
        SchemaKind::Float32 => "FloatValue",
        SchemaKind::Float64 => "DoubleValue",
        SchemaKind::Boolean => "BoolValue",
        SchemaKind::String => "StringValue",
        SchemaKind::Bytes => "BytesValue",
        _ => return Ok(None),
    };
    let file = prost_reflect::DescriptorPool::global()
        .get_file_by_name("google/protobuf/wrappers.proto")
        .expect("the well-known types are in the global pool");
    let index = file
        .messages()
        .position(|m| m.name() == wrapper)
        .expect("wrappers.proto has every wrapper");
    let text = base64::engine::general_purpose::STANDARD
        .encode(file.file_descriptor_proto().encode_to_vec());
    Ok(Some((text, vec![index as i32])))
}

/// Writes messages as Confluent's `ProtobufSchema` prints them.
#[derive(Default)]
struct TextWriter {
    imports: Vec<&'static str>,
    unnamed: u32,
}

impl TextWriter {
    fn name_or_default(&mut self, name: Option<&str>) -> String {
        match name.filter(|n| !n.is_empty()) {
            Some(n) => n.to_string(),
            None => {
                self.unnamed += 1;
                format!("ConnectDefault{}", self.unnamed)
            }
        }
    }

    fn import(&mut self, file: &'static str) {
        if !self.imports.contains(&file) {
            self.imports.push(file);
        }
    }

    /// `message NAME { ... }` at `depth`, with its nested types.
    fn message(&mut self, name: &str, schema: &Schema, depth: usize) -> Result<String, String> {
        let SchemaKind::Struct(fields) = &schema.kind else {
            unreachable!("messages are written for structs")
        };
        let pad = "  ".repeat(depth + 1);
        let mut lines = Vec::new();
        let mut oneofs = Vec::new();
        let mut nested: Vec<(String, String)> = Vec::new();
        let mut enums: Vec<(String, String)> = Vec::new();
        let mut next_tag = 1u32;
        // A field without a Tag takes the next number no tagged field has
        // (all untagged: 1, 2, 3, as Confluent numbers them), so a field a
        // transform added never collides with the message's own.
        let tagged: HashSet<u32> = fields
            .iter()
            .flat_map(|f| match &f.schema.kind {
                SchemaKind::Struct(members) if is_union_name(&f.schema) => {
                    members.iter().map(|m| &m.schema).collect::<Vec<_>>()
                }
                _ => vec![&f.schema],
            })
            .filter_map(|s| s.parameter(TAG).and_then(|t| t.parse().ok()))
            .collect();
        let mut tags = HashSet::new();
        let mut tag_of = |s: &Schema, next: &mut u32| -> Result<u32, String> {
            let tag = match s.parameter(TAG) {
                Some(t) => t
                    .parse::<u32>()
                    .ok()
                    .filter(|t| (1..=536_870_911).contains(t))
                    .ok_or_else(|| format!("the {TAG} parameter `{t}` is not a field number"))?,
                None => {
                    while tagged.contains(next) {
                        *next += 1;
                    }
                    let t = *next;
                    *next += 1;
                    t
                }
            };
            if !tags.insert(tag) {
                return Err(format!("two fields of `{name}` have field number {tag}"));
            }
            Ok(tag)
        };
        for f in fields {
            check_identifier(&f.name)?;
            if let (SchemaKind::Struct(members), Some(union)) = (
                &f.schema.kind,
                f.schema.name.as_deref().and_then(|n| n.strip_prefix(UNION)),
            ) {
                let oneof = union.strip_prefix('.').unwrap_or(union);
                let oneof = if oneof.is_empty() {
                    f.name.as_str()
                } else {
                    oneof
                };
                check_identifier(oneof)?;
                let mut block = format!("{pad}oneof {oneof} {{\n");
                for m in members {
                    check_identifier(&m.name)?;
                    let tag = tag_of(&m.schema, &mut next_tag)?;
                    let (ty, option) =
                        self.field_type(&m.name, &m.schema, depth, &mut nested, &mut enums)?;
                    block.push_str(&format!("{pad}  {ty} {} = {tag}{option};\n", m.name));
                }
                block.push_str(&format!("{pad}}}\n"));
                oneofs.push(block);
                continue;
            }
            let tag = tag_of(&f.schema, &mut next_tag)?;
            let (label, element) = match &f.schema.kind {
                SchemaKind::Array(items) => {
                    if matches!(items.kind, SchemaKind::Array(_) | SchemaKind::Map(..)) {
                        return Err(format!(
                            "field `{}`: an array of {}s has no Protobuf form (Confluent's converter refuses it too)",
                            f.name,
                            items.kind.type_name()
                        ));
                    }
                    ("repeated ", &**items)
                }
                SchemaKind::Map(..) => ("repeated ", &f.schema),
                _ => ("", &f.schema),
            };
            let (ty, option) = self.field_type(&f.name, element, depth, &mut nested, &mut enums)?;
            lines.push(format!("{pad}{label}{ty} {} = {tag}{option};\n", f.name));
        }
        let mut out = format!("{}message {name} {{\n", "  ".repeat(depth));
        for l in lines {
            out.push_str(&l);
        }
        for o in oneofs {
            out.push_str(&o);
        }
        if !nested.is_empty() || !enums.is_empty() {
            out.push('\n');
        }
        for (_, n) in nested {
            out.push_str(&n);
        }
        for (_, e) in enums {
            out.push_str(&e);
        }
        out.push_str(&format!("{}}}\n", "  ".repeat(depth)));
        Ok(out)
    }

    /// A field's type name and its options' text, adding any nested
    /// message or enum it needs.
    fn field_type(
        &mut self,
        field: &str,
        s: &Schema,
        depth: usize,
        nested: &mut Vec<(String, String)>,
        enums: &mut Vec<(String, String)>,
    ) -> Result<(String, String), String> {
        let meta = |params: &[(&str, String)]| {
            let entries: Vec<String> = params
                .iter()
                .map(|(k, v)| format!("{{ key: \"{k}\", value: \"{v}\" }}"))
                .collect();
            format!(
                " [(confluent.field_meta) = {{ params: [{}] }}]",
                entries.join(", ")
            )
        };
        match s.name.as_deref() {
            Some(DECIMAL) => {
                self.import("confluent/type/decimal.proto");
                self.import("confluent/meta.proto");
                let mut params = Vec::new();
                if let Some(p) = s.parameter(DECIMAL_PRECISION) {
                    params.push(("precision", p.to_string()));
                }
                params.push((
                    "scale",
                    s.parameter(DECIMAL_SCALE).unwrap_or("0").to_string(),
                ));
                return Ok((DECIMAL_MESSAGE.into(), meta(&params)));
            }
            Some(DATE) => {
                self.import("google/type/date.proto");
                return Ok((DATE_MESSAGE.into(), String::new()));
            }
            Some(TIME) => {
                self.import("google/type/timeofday.proto");
                return Ok((TIME_MESSAGE.into(), String::new()));
            }
            Some(TIMESTAMP) => {
                self.import("google/protobuf/timestamp.proto");
                return Ok((TIMESTAMP_MESSAGE.into(), String::new()));
            }
            _ => {}
        }
        if let Some(enum_name) = s.parameter(ENUM)
            && matches!(s.kind, SchemaKind::String | SchemaKind::Int32)
        {
            let short = enum_name
                .rsplit('.')
                .next()
                .unwrap_or(enum_name)
                .to_string();
            check_identifier(&short)?;
            if !enums.iter().any(|(n, _)| *n == short) {
                let pad = "  ".repeat(depth + 1);
                let mut text = format!("{pad}enum {short} {{\n");
                let prefix = format!("{ENUM}.");
                let mut any = false;
                for (k, v) in &s.parameters {
                    if let Some(symbol) = k.strip_prefix(&prefix) {
                        check_identifier(symbol)?;
                        let n: i32 = v.parse().map_err(|_| {
                            format!("enum symbol `{symbol}` has number `{v}`, not an integer")
                        })?;
                        text.push_str(&format!("{pad}  {symbol} = {n};\n"));
                        any = true;
                    }
                }
                if !any {
                    return Err(format!("field `{field}`: enum `{short}` lists no symbols"));
                }
                text.push_str(&format!("{pad}}}\n"));
                enums.push((short.clone(), text));
            }
            return Ok((short, String::new()));
        }
        let typed = |default: &str, allowed: &[&str]| -> Result<String, String> {
            match s.parameter(TYPE) {
                None => Ok(default.to_string()),
                Some(t) if allowed.contains(&t) => Ok(t.to_string()),
                Some(t) => Err(format!(
                    "field `{field}`: {TYPE} `{t}` is not a Protobuf type of a {}",
                    s.kind.type_name()
                )),
            }
        };
        Ok(match &s.kind {
            SchemaKind::Int8 | SchemaKind::Int16 => {
                self.import("confluent/meta.proto");
                (
                    "int32".into(),
                    meta(&[("connect.type", s.kind.type_name().to_string())]),
                )
            }
            SchemaKind::Int32 => (
                typed("int32", &["int32", "sint32", "sfixed32"])?,
                String::new(),
            ),
            SchemaKind::Int64 => (
                typed(
                    "int64",
                    &[
                        "int64", "uint32", "fixed32", "uint64", "sint64", "fixed64", "sfixed64",
                    ],
                )?,
                String::new(),
            ),
            SchemaKind::Float32 => ("float".into(), String::new()),
            SchemaKind::Float64 => ("double".into(), String::new()),
            SchemaKind::Boolean => ("bool".into(), String::new()),
            SchemaKind::String => ("string".into(), String::new()),
            SchemaKind::Bytes => ("bytes".into(), String::new()),
            SchemaKind::Struct(_) => {
                let full = self.name_or_default(s.name.as_deref());
                let mut short = full.rsplit('.').next().unwrap_or(&full).to_string();
                if short == field {
                    short.push_str("Message");
                }
                check_identifier(&short)?;
                self.nest(&short, s, depth, nested)?;
                (short, String::new())
            }
            SchemaKind::Map(keys, values) => {
                let full = self.name_or_default(s.name.as_deref());
                let short = full.rsplit('.').next().unwrap_or(&full);
                let entry = format!("{}Entry", upper_camel(short));
                check_identifier(&entry)?;
                let entry_schema =
                    Schema::structure([("key", (**keys).clone()), ("value", (**values).clone())]);
                if !nested.iter().any(|(n, _)| *n == entry) {
                    let text = self.message(&entry, &entry_schema, depth + 1)?;
                    nested.push((entry.clone(), text));
                }
                (entry, String::new())
            }
            SchemaKind::Array(_) => {
                return Err(format!(
                    "field `{field}`: an array inside an array or map has no Protobuf form"
                ));
            }
        })
    }

    fn nest(
        &mut self,
        short: &str,
        s: &Schema,
        depth: usize,
        nested: &mut Vec<(String, String)>,
    ) -> Result<(), String> {
        if nested.iter().any(|(n, _)| n == short) {
            return Ok(());
        }
        let text = self.message(short, s, depth + 1)?;
        nested.push((short.to_string(), text));
        Ok(())
    }
}

fn is_union_name(s: &Schema) -> bool {
    s.name.as_deref().is_some_and(|n| n.starts_with(UNION))
}

/// Confluent's `toMapEntry` base: `map_type` is `MapType`.
fn upper_camel(name: &str) -> String {
    if !name.contains('_') {
        let mut c = name.chars();
        return match c.next() {
            Some(first) => first.to_ascii_uppercase().to_string() + c.as_str(),
            None => String::new(),
        };
    }
    name.split('_')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            let first = c.next().expect("not empty").to_ascii_uppercase();
            first.to_string() + &c.as_str().to_ascii_lowercase()
        })
        .collect()
}

/// A name Protobuf allows; others are refused, naming them (Confluent's
/// `scrub.invalid.names` is off by default too).
fn check_identifier(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not a Protobuf identifier (letters, digits and `_`, not starting with a digit)"
        ))
    }
}

/// Whether a message's field is a value Connect sees as present.
pub(crate) fn present(msg: &DynamicMessage, f: &FieldDescriptor) -> bool {
    !null_when_unset(f) || msg.has_field(f)
}

/// proto2's `required`, which compatibility checks care about.
pub(crate) fn is_required(f: &FieldDescriptor) -> bool {
    f.cardinality() == Cardinality::Required
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compiled_root(text: &str) -> MessageDescriptor {
        compile::compile(text).unwrap().message_at(&[0]).unwrap()
    }

    #[test]
    fn connect_schemas_write_as_confluents_proto_and_read_back() {
        let s = Schema::structure([
            ("id", Schema::int64()),
            ("name", Schema::string()),
            ("note", Schema::string().optional()),
            ("tags", Schema::array(Schema::string())),
        ])
        .named("shop.Order");
        let (text, indexes) = from_connect(&s).unwrap();
        assert_eq!(
            text,
            "syntax = \"proto3\";\npackage shop;\n\nmessage Order {\n  int64 id = 1;\n  string name = 2;\n  string note = 3;\n  repeated string tags = 4;\n}\n"
        );
        assert_eq!(indexes, vec![0]);
        let back = to_connect(&compiled_root(&text), false).unwrap();
        let tagged = |s: Schema, n: u32| with_tag(s, n);
        assert_eq!(
            back,
            Schema::structure([
                ("id", tagged(Schema::int64(), 1)),
                ("name", tagged(Schema::string(), 2)),
                ("note", tagged(Schema::string(), 3)),
                (
                    "tags",
                    tagged(Schema::array(Schema::string().optional()), 4)
                ),
            ])
            .named("Order")
        );
        // What was read writes back as the same schema.
        let mut renamed = back.clone();
        renamed.name = Some("shop.Order".into());
        assert_eq!(
            compile::identity(&from_connect(&renamed).unwrap().0).unwrap(),
            compile::identity(&text).unwrap()
        );
    }

    #[test]
    fn logical_types_nested_structs_maps_and_small_ints_round_trip() {
        let s = Schema::structure([
            ("qty", Schema::int8()),
            ("price", Schema::decimal(2)),
            ("day", Schema::date().optional()),
            ("at", Schema::time().optional()),
            ("ts", Schema::timestamp().optional()),
            (
                "addr",
                Schema::structure([("street", Schema::string())])
                    .named("shop.Address")
                    .optional(),
            ),
            ("attrs", Schema::map(Schema::string(), Schema::int32())),
            ("by_id", Schema::map(Schema::int32(), Schema::string())),
        ]);
        let (text, _) = from_connect(&s).unwrap();
        assert!(text.contains("message ConnectDefault1 {"), "{text}");
        assert!(
            text.contains("repeated ConnectDefault2Entry attrs = 7;"),
            "{text}"
        );
        assert!(
            text.contains("import \"google/protobuf/timestamp.proto\";"),
            "{text}"
        );
        let back = to_connect(&compiled_root(&text), false).unwrap();
        let SchemaKind::Struct(fields) = &back.kind else {
            panic!()
        };
        let kinds: Vec<_> = fields
            .iter()
            .map(|f| {
                (
                    f.name.as_str(),
                    f.schema.kind.type_name(),
                    f.schema.name.clone(),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("qty", "int8", None),
                ("price", "bytes", Some(DECIMAL.to_string())),
                ("day", "int32", Some(DATE.to_string())),
                ("at", "int32", Some(TIME.to_string())),
                ("ts", "int64", Some(TIMESTAMP.to_string())),
                ("addr", "struct", Some("Address".to_string())),
                ("attrs", "map", Some("connect_default2".to_string())),
                ("by_id", "map", Some("connect_default3".to_string())),
            ]
        );
        assert_eq!(fields[1].schema.parameter(DECIMAL_SCALE), Some("2"));
        assert!(fields.iter().all(|f| f.schema.optional));
    }

    #[test]
    fn oneofs_enums_and_unsigned_types_read_as_confluent_reads_them() {
        let m = compiled_root(
            "syntax = \"proto3\";\nmessage Event {\n  uint32 n = 1;\n  Kind kind = 2;\n  oneof payload { string text = 3; int64 count = 4; }\n  optional string note = 5;\n  enum Kind { UNKNOWN = 0; CLICK = 1; }\n}\n",
        );
        let s = to_connect(&m, false).unwrap();
        let SchemaKind::Struct(fields) = &s.kind else {
            panic!()
        };
        let names: Vec<_> = fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["payload_0", "n", "kind", "note"]);
        assert_eq!(
            fields[0].schema.name.as_deref(),
            Some("io.confluent.connect.protobuf.Union.payload")
        );
        assert_eq!(fields[1].schema.parameter(TYPE), Some("uint32"));
        assert_eq!(
            fields[2]
                .schema
                .parameter("io.confluent.connect.protobuf.Enum.CLICK"),
            Some("1")
        );
        // And it writes back as the same message.
        let mut named = s.clone();
        named.name = Some("Event".into());
        let (text, _) = from_connect(&named).unwrap();
        let again = to_connect(&compiled_root(&text), false).unwrap();
        let SchemaKind::Struct(again_fields) = &again.kind else {
            panic!()
        };
        assert_eq!(again_fields[..3], fields[..3], "{text}");
    }

    #[test]
    fn a_field_without_a_tag_takes_a_number_no_field_has() {
        let read = to_connect(
            &compiled_root("syntax = \"proto3\";\nmessage M { int32 a = 1; string b = 2; }"),
            false,
        )
        .unwrap();
        let SchemaKind::Struct(mut fields) = read.kind else {
            panic!()
        };
        fields.insert(
            0,
            sluice_sdk::schema::Field {
                name: "added".into(),
                schema: Schema::string().optional(),
            },
        );
        let (text, _) = from_connect(&Schema::structure(
            fields.into_iter().map(|f| (f.name, f.schema)),
        ))
        .unwrap();
        assert!(text.contains("string added = 3;"), "{text}");
        assert!(
            text.contains("int32 a = 1;") && text.contains("string b = 2;"),
            "{text}"
        );
    }

    #[test]
    fn what_protobuf_cannot_hold_is_refused_naming_it() {
        for (s, says) in [
            (Schema::array(Schema::int32()), "this one is array"),
            (
                Schema::structure([("a", Schema::array(Schema::array(Schema::int32())))]),
                "array of arrays",
            ),
            (
                Schema::structure([("bad name", Schema::int32())]),
                "`bad name`",
            ),
            (Schema::date(), "logical type"),
        ] {
            let e = from_connect(&s).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
        let (text, indexes) = from_connect(&Schema::string()).unwrap();
        let compiled = compile::compile(&text).unwrap();
        assert_eq!(
            compiled.message_at(&indexes).unwrap().full_name(),
            "google.protobuf.StringValue"
        );
    }
}
