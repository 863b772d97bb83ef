//! Compatibility of Protobuf schemas, by the rules of Confluent's registry
//! (`SchemaDiff`): fields are matched by number, so renaming a field, or
//! adding and removing one, is compatible; what changes how existing
//! bytes decode is not:
//! - the package changed; a message removed (a map's entry excepted);
//! - a field's kind changed between scalar, message and map; its scalar
//!   type changed outside one wire-compatible group (`int32 int64 uint32
//!   uint64 bool enum`, `sint32 sint64`, `string bytes`, `fixed32
//!   sfixed32`, `fixed64 sfixed64`); its message type changed;
//! - a numeric field's explicit label changed (e.g. `optional` to
//!   `repeated`); a proto2 `required` field added or removed;
//! - a oneof lost a member while it remains, or took in a field that was
//!   outside it.
//!
//! `can_read(reader, writer)` compares the writer's schema (the original)
//! with the reader's (the update), as Confluent's BACKWARD check does.

use std::collections::HashMap;

use prost_reflect::{Cardinality, FieldDescriptor, Kind, MessageDescriptor};

use super::compile::compile;
use super::{is_entry, is_required};

/// `Ok` if data written with `writer` reads with `reader`; else every
/// difference that breaks it, as Confluent names them.
pub fn can_read(reader: &str, writer: &str) -> Result<(), String> {
    let new = compile(reader)?;
    let old = compile(writer)?;
    let mut problems = Vec::new();
    if old.file.package_name() != new.file.package_name() {
        problems.push("PACKAGE_CHANGED #/".to_string());
    }
    let new_messages: HashMap<String, MessageDescriptor> = all_messages(new.file.messages())
        .into_iter()
        .map(|m| (relative_name(&m, new.file.package_name()), m))
        .collect();
    for old_m in all_messages(old.file.messages()) {
        let name = relative_name(&old_m, old.file.package_name());
        match new_messages.get(&name) {
            None if old_m.is_map_entry() => {}
            None => problems.push(format!("MESSAGE_REMOVED #/{name}")),
            Some(new_m) => compare_message(&old_m, new_m, &name, &mut problems),
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join(", "))
    }
}

fn all_messages(top: impl Iterator<Item = MessageDescriptor>) -> Vec<MessageDescriptor> {
    let mut out = Vec::new();
    for m in top {
        let nested: Vec<_> = m.child_messages().collect();
        out.push(m);
        out.extend(all_messages(nested.into_iter()));
    }
    out
}

fn relative_name(m: &MessageDescriptor, package: &str) -> String {
    m.full_name()
        .strip_prefix(package)
        .and_then(|n| n.strip_prefix('.'))
        .unwrap_or(m.full_name())
        .to_string()
}

#[derive(PartialEq)]
enum FieldKind {
    Scalar(u8),
    Message(String),
    Map,
}

fn field_kind(f: &FieldDescriptor) -> FieldKind {
    let group = match f.kind() {
        Kind::Message(m) if f.is_map() || (f.is_list() && is_entry(&m)) => return FieldKind::Map,
        Kind::Message(m) => {
            let package = m.parent_file().package_name().to_string();
            return FieldKind::Message(relative_name(&m, &package));
        }
        Kind::Int32 | Kind::Int64 | Kind::Uint32 | Kind::Uint64 | Kind::Bool | Kind::Enum(_) => 0,
        Kind::Sint32 | Kind::Sint64 => 1,
        Kind::String | Kind::Bytes => 2,
        Kind::Fixed32 | Kind::Sfixed32 => 3,
        Kind::Fixed64 | Kind::Sfixed64 => 4,
        Kind::Float => 5,
        Kind::Double => 6,
    };
    FieldKind::Scalar(group)
}

/// A field's label where it is written out: repeated, required, or an
/// explicit `optional`; `None` for proto3's implicit singular fields.
fn label(f: &FieldDescriptor) -> Option<Cardinality> {
    if f.is_list() || f.is_map() {
        return Some(Cardinality::Repeated);
    }
    match f.cardinality() {
        Cardinality::Required => Some(Cardinality::Required),
        _ if f.field_descriptor_proto().proto3_optional() => Some(Cardinality::Optional),
        _ if f.parent_file().syntax() == prost_reflect::Syntax::Proto2 => {
            Some(Cardinality::Optional)
        }
        _ => None,
    }
}

fn compare_message(
    old: &MessageDescriptor,
    new: &MessageDescriptor,
    name: &str,
    problems: &mut Vec<String>,
) {
    let oneof_of = |f: &FieldDescriptor| {
        f.containing_oneof()
            .filter(|o| !o.is_synthetic())
            .map(|o| o.name().to_string())
    };
    let mut moved_into: HashMap<String, usize> = HashMap::new();
    for old_f in old.fields() {
        let at = format!("#/{name}/{}", old_f.number());
        let Some(new_f) = new.get_field(old_f.number()) else {
            if is_required(&old_f) {
                problems.push(format!("REQUIRED_FIELD_REMOVED {at}"));
            }
            if let Some(o) = oneof_of(&old_f)
                && new.oneofs().any(|n| n.name() == o)
            {
                problems.push(format!("ONEOF_FIELD_REMOVED {at}"));
            }
            continue;
        };
        match (field_kind(&old_f), field_kind(&new_f)) {
            (FieldKind::Scalar(a), FieldKind::Scalar(b)) if a != b => {
                problems.push(format!("FIELD_SCALAR_KIND_CHANGED {at}"))
            }
            (FieldKind::Message(a), FieldKind::Message(b)) if a != b => {
                problems.push(format!("FIELD_NAMED_TYPE_CHANGED {at}"))
            }
            (a, b) if std::mem::discriminant(&a) != std::mem::discriminant(&b) => {
                problems.push(format!("FIELD_KIND_CHANGED {at}"))
            }
            _ => {}
        }
        let numeric = !matches!(old_f.kind(), Kind::String | Kind::Bytes | Kind::Message(_));
        if let (Some(a), Some(b)) = (label(&old_f), label(&new_f))
            && a != b
            && numeric
        {
            problems.push(format!("FIELD_NUMERIC_LABEL_CHANGED {at}"));
        }
        if let (None, Some(o)) = (oneof_of(&old_f), oneof_of(&new_f)) {
            if old.oneofs().any(|x| x.name() == o) {
                problems.push(format!("FIELD_MOVED_TO_EXISTING_ONEOF {at}"));
            } else {
                *moved_into.entry(o).or_default() += 1;
            }
        }
    }
    for (o, n) in moved_into {
        if n > 1 {
            problems.push(format!("MULTIPLE_FIELDS_MOVED_TO_ONEOF #/{name}/{o}"));
        }
    }
    for new_f in new.fields() {
        if old.get_field(new_f.number()).is_none() && is_required(&new_f) {
            problems.push(format!("REQUIRED_FIELD_ADDED #/{name}/{}", new_f.number()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = "syntax = \"proto3\";\npackage shop;\nmessage Order {\n  int64 id = 1;\n  string name = 2;\n  Line line = 3;\n  message Line { string sku = 1; }\n}\n";

    fn check(new: &str) -> Result<(), String> {
        can_read(new, V1)
    }

    #[test]
    fn confluents_rules_decide() {
        // Compatible: a field added, removed or renamed; int64 to uint64.
        assert_eq!(check(&V1.replace("  string name = 2;\n", "")), Ok(()));
        assert_eq!(
            check(&V1.replace("string name = 2;", "string name = 2;\n  bool gift = 4;")),
            Ok(())
        );
        assert_eq!(
            check(&V1.replace("string name = 2;", "string title = 2;")),
            Ok(())
        );
        assert_eq!(
            check(&V1.replace("int64 id = 1;", "uint64 id = 1;")),
            Ok(())
        );
        assert_eq!(
            check(&V1.replace("string name = 2;", "bytes name = 2;")),
            Ok(())
        );
        // Incompatible, each named as Confluent names it.
        for (new, says) in [
            (
                V1.replace("int64 id = 1;", "string id = 1;"),
                "FIELD_SCALAR_KIND_CHANGED #/Order/1",
            ),
            (
                V1.replace("int64 id = 1;", "Line id = 1;"),
                "FIELD_KIND_CHANGED #/Order/1",
            ),
            (
                V1.replace("package shop;", "package store;"),
                "PACKAGE_CHANGED",
            ),
            (
                V1.replace("  Line line = 3;\n  message Line { string sku = 1; }\n", ""),
                "MESSAGE_REMOVED #/Order.Line",
            ),
            (
                V1.replace(
                    "string name = 2;",
                    "oneof o { string name = 2; int64 id2 = 5; }",
                )
                .replace("int64 id = 1;", "")
                .replace("int64 id2 = 5;", "int64 id = 1;"),
                "MULTIPLE_FIELDS_MOVED_TO_ONEOF",
            ),
        ] {
            let e = check(&new).unwrap_err();
            assert!(e.contains(says), "{new}: {e}");
        }
        let e = can_read(
            &V1.replace("int64 id = 1;", "repeated int64 id = 1;"),
            &V1.replace("int64 id = 1;", "optional int64 id = 1;"),
        )
        .unwrap_err();
        assert!(e.contains("FIELD_NUMERIC_LABEL_CHANGED #/Order/1"), "{e}");
    }
}
