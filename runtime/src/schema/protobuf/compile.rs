//! A registry's Protobuf schema text into descriptors.
//!
//! Registries hold a schema as `.proto` text, or (as Confluent's Python
//! serializer registers it) as the base64 of a serialized
//! `FileDescriptorProto`; both are accepted. Imports resolve to Google's
//! well-known types and to the files Confluent's converters import for
//! logical types (`confluent/type/decimal.proto`, `google/type/date.proto`,
//! `google/type/timeofday.proto`, `confluent/meta.proto`); any other
//! import would be a schema reference, which Sluice does not resolve.

use base64::Engine as _;
use prost::Message as _;
use prost_reflect::{DescriptorPool, FileDescriptor, MessageDescriptor};
use protox::file::{File, FileResolver, GoogleFileResolver};

/// The name a schema given as text compiles under.
const MAIN_FILE: &str = "schema.proto";

/// The imports Confluent's converters use for Connect's logical types and
/// metadata, written from their documented message layouts.
const BUILTIN_IMPORTS: [(&str, &str); 4] = [
    (
        "confluent/type/decimal.proto",
        "syntax = \"proto3\";\npackage confluent.type;\n\nmessage Decimal {\n  bytes value = 1;\n  uint32 precision = 2;\n  int32 scale = 3;\n}\n",
    ),
    (
        "google/type/date.proto",
        "syntax = \"proto3\";\npackage google.type;\n\nmessage Date {\n  int32 year = 1;\n  int32 month = 2;\n  int32 day = 3;\n}\n",
    ),
    (
        "google/type/timeofday.proto",
        "syntax = \"proto3\";\npackage google.type;\n\nmessage TimeOfDay {\n  int32 hours = 1;\n  int32 minutes = 2;\n  int32 seconds = 3;\n  int32 nanos = 4;\n}\n",
    ),
    (
        "confluent/meta.proto",
        "syntax = \"proto3\";\npackage confluent;\n\nimport \"google/protobuf/descriptor.proto\";\n\nmessage Meta {\n  string doc = 1;\n  map<string, string> params = 2;\n  repeated string tags = 3;\n}\n\nextend google.protobuf.FileOptions {\n  Meta file_meta = 1088;\n}\nextend google.protobuf.MessageOptions {\n  Meta message_meta = 1088;\n}\nextend google.protobuf.FieldOptions {\n  Meta field_meta = 1088;\n}\nextend google.protobuf.EnumOptions {\n  Meta enum_meta = 1088;\n}\nextend google.protobuf.EnumValueOptions {\n  Meta enum_value_meta = 1088;\n}\n",
    ),
];

/// A compiled schema: its file (with its imports in the pool).
#[derive(Debug, Clone)]
pub struct Compiled {
    pub file: FileDescriptor,
}

impl Compiled {
    /// The message a record's message indexes name: the first index is
    /// a top-level message, each next one a message nested in the last.
    pub fn message_at(&self, indexes: &[i32]) -> Result<MessageDescriptor, String> {
        let mut current: Option<MessageDescriptor> = None;
        for (depth, &i) in indexes.iter().enumerate() {
            let found = match &current {
                None => self.file.messages().nth(i as usize),
                Some(m) => m.child_messages().nth(i as usize),
            };
            current = Some(found.filter(|_| i >= 0).ok_or_else(|| {
                format!(
                    "message index {i} at depth {depth} names no message of the schema (indexes {indexes:?})"
                )
            })?);
        }
        current.ok_or_else(|| "the schema has no message".to_string())
    }

    /// The message indexes of `message`, a message of this file.
    pub fn indexes_of(&self, message: &MessageDescriptor) -> Vec<i32> {
        let mut path = Vec::new();
        let mut m = message.clone();
        loop {
            match m.parent_message() {
                Some(parent) => {
                    let i = parent
                        .child_messages()
                        .position(|c| c.full_name() == m.full_name())
                        .expect("a nested message is its parent's child");
                    path.push(i as i32);
                    m = parent;
                }
                None => {
                    let i = self
                        .file
                        .messages()
                        .position(|c| c.full_name() == m.full_name())
                        .expect("a top-level message is its file's");
                    path.push(i as i32);
                    break;
                }
            }
        }
        path.reverse();
        path
    }
}

struct Resolver {
    main: File,
    google: GoogleFileResolver,
}

impl FileResolver for Resolver {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        if self.main.name() == name {
            return Ok(File::from_file_descriptor_proto(
                self.main.file_descriptor_proto().clone(),
            ));
        }
        if let Some((_, source)) = BUILTIN_IMPORTS.iter().find(|(n, _)| *n == name) {
            return File::from_source(name, source);
        }
        self.google.open_file(name)
    }
}

/// Compiles `text` (`.proto` source or the base64 of a
/// `FileDescriptorProto`): `Err` says why it is not a schema.
pub fn compile(text: &str) -> Result<Compiled, String> {
    let main = match File::from_source(MAIN_FILE, text) {
        Ok(f) => f,
        Err(source_error) => {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(text.trim())
                .ok()
                .and_then(|b| prost_types::FileDescriptorProto::decode(b.as_slice()).ok())
                .filter(|d| !d.message_type.is_empty() || d.name.is_some());
            match decoded {
                Some(d) => File::from_file_descriptor_proto(d),
                None => {
                    return Err(format!(
                        "not a Protobuf schema (neither .proto text nor a base64 FileDescriptorProto): {source_error}"
                    ));
                }
            }
        }
    };
    let name = main.name().to_string();
    let mut compiler = protox::Compiler::with_file_resolver(Resolver {
        main,
        google: GoogleFileResolver::new(),
    });
    compiler.open_file(&name).map_err(|e| {
        let e = e.to_string();
        if e.contains("not found") {
            format!("{e} (an import other than Google's well-known types and Confluent's logical types is a schema reference, which Sluice does not resolve)")
        } else {
            e
        }
    })?;
    let pool: DescriptorPool = compiler.descriptor_pool();
    let file = pool
        .get_file_by_name(&name)
        .ok_or_else(|| format!("the compiled schema has no file `{name}`"))?;
    Ok(Compiled { file })
}

/// The base64 of the schema's `FileDescriptorProto`: Confluent's
/// `serialized` format.
pub fn serialized(text: &str) -> Result<String, String> {
    let compiled = compile(text)?;
    Ok(base64::engine::general_purpose::STANDARD
        .encode(compiled.file.file_descriptor_proto().encode_to_vec()))
}

/// A schema's identity in a registry: its descriptor, without names of
/// files or source positions, so the same schema as text and as a
/// descriptor, or re-spaced, is one schema.
pub fn identity(text: &str) -> Result<String, String> {
    let compiled = compile(text)?;
    let mut proto = compiled.file.file_descriptor_proto().clone();
    proto.name = None;
    proto.source_code_info = None;
    for m in &mut proto.message_type {
        clear_json_names(m);
    }
    Ok(base64::engine::general_purpose::STANDARD.encode(proto.encode_to_vec()))
}

fn clear_json_names(m: &mut prost_types::DescriptorProto) {
    for f in &mut m.field {
        f.json_name = None;
    }
    for n in &mut m.nested_type {
        clear_json_names(n);
    }
}

/// Reads Confluent's message indexes after the schema id: a zigzag varint
/// count, then that many zigzag varint indexes; a count of 0 means `[0]`
/// (the first message). Gives the indexes and the rest of the bytes.
pub fn read_indexes(bytes: &[u8]) -> Result<(Vec<i32>, &[u8]), String> {
    let mut rest = bytes;
    let count = read_zigzag(&mut rest).ok_or("the message indexes are cut short")?;
    if count == 0 {
        return Ok((vec![0], rest));
    }
    if !(0..=100).contains(&count) {
        return Err(format!(
            "the message indexes' count {count} is not a nesting depth"
        ));
    }
    let mut indexes = Vec::with_capacity(count as usize);
    for _ in 0..count {
        indexes.push(read_zigzag(&mut rest).ok_or("the message indexes are cut short")?);
    }
    Ok((indexes, rest))
}

/// Writes message indexes as Confluent's serializers do (`[0]` as one 0).
pub fn write_indexes(out: &mut Vec<u8>, indexes: &[i32]) {
    if indexes == [0] {
        out.push(0);
        return;
    }
    write_zigzag(out, indexes.len() as i32);
    for &i in indexes {
        write_zigzag(out, i);
    }
}

fn read_zigzag(bytes: &mut &[u8]) -> Option<i32> {
    let mut value: u64 = 0;
    for shift in (0..35).step_by(7) {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            let v = value as u32;
            return Some(((v >> 1) as i32) ^ -((v & 1) as i32));
        }
    }
    None
}

fn write_zigzag(out: &mut Vec<u8>, v: i32) {
    let mut z = ((v << 1) ^ (v >> 31)) as u32;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_indexes_round_trip_as_confluent_writes_them() {
        for (indexes, bytes) in [
            (vec![0], vec![0u8]),
            (vec![1], vec![2, 2]),
            (vec![0, 2], vec![4, 0, 4]),
            (vec![70], vec![2, 0x8c, 0x01]),
        ] {
            let mut out = Vec::new();
            write_indexes(&mut out, &indexes);
            assert_eq!(out, bytes, "{indexes:?}");
            out.push(9);
            let (read, rest) = read_indexes(&out).unwrap();
            assert_eq!(read, indexes);
            assert_eq!(rest, [9]);
        }
        assert!(read_indexes(&[]).is_err());
        assert!(read_indexes(&[4, 0]).is_err());
        assert!(read_indexes(&[0x80, 0x80]).is_err());
    }

    #[test]
    fn text_and_descriptor_forms_are_one_schema() {
        let text = "syntax = \"proto3\";\npackage shop;\nmessage Order { int64 id = 1; Line line = 2; message Line { string sku = 1; } }\nmessage Other { bool b = 1; }";
        let compiled = compile(text).unwrap();
        let line = compiled.message_at(&[0, 0]).unwrap();
        assert_eq!(line.full_name(), "shop.Order.Line");
        assert_eq!(compiled.indexes_of(&line), vec![0, 0]);
        assert_eq!(compiled.message_at(&[1]).unwrap().full_name(), "shop.Other");
        assert!(compiled.message_at(&[2]).is_err());
        let mut proto = compiled.file.file_descriptor_proto().clone();
        proto.name = Some("orders.proto".into());
        let as_descriptor = base64::engine::general_purpose::STANDARD.encode(proto.encode_to_vec());
        assert_eq!(identity(&as_descriptor).unwrap(), identity(text).unwrap());
        let respaced = text.replace("; ", ";\n   ");
        assert_eq!(identity(&respaced).unwrap(), identity(text).unwrap());
        let with_imports = "syntax = \"proto3\";\nimport \"google/protobuf/timestamp.proto\";\nimport \"confluent/type/decimal.proto\";\nmessage M { google.protobuf.Timestamp at = 1; confluent.type.Decimal d = 2; }";
        assert!(compile(with_imports).is_ok());
        let e =
            compile("syntax = \"proto3\";\nimport \"other.proto\";\nmessage M { Other o = 1; }")
                .unwrap_err();
        assert!(e.contains("schema reference"), "{e}");
        assert!(
            compile("message {")
                .unwrap_err()
                .contains("not a Protobuf schema")
        );
    }
}
