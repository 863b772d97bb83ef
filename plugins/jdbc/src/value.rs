//! JSON field values as SQL values, and the coercions into a column's type.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    Int,
    Float,
    Bool,
    Text,
}

impl ColumnKind {
    /// The kind of a declared column type, by the databases' affinity rules.
    pub fn from_declared(declared: &str) -> Self {
        let t = declared.to_ascii_uppercase();
        if t.contains("BOOL") {
            ColumnKind::Bool
        } else if t.contains("INT") && !t.contains("POINT") && !t.contains("INTERVAL") {
            ColumnKind::Int
        } else if ["REAL", "FLOA", "DOUB", "NUMERIC", "DECIMAL"]
            .iter()
            .any(|k| t.contains(k))
        {
            ColumnKind::Float
        } else {
            ColumnKind::Text
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    Null,
    Int(i64),
    Float(f64),
    Bool(bool),
    Text(String),
}

pub fn json_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

impl SqlValue {
    pub fn from_json(v: &serde_json::Value) -> Self {
        match v {
            serde_json::Value::Null => SqlValue::Null,
            serde_json::Value::Bool(b) => SqlValue::Bool(*b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => SqlValue::Int(i),
                None => SqlValue::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            serde_json::Value::String(s) => SqlValue::Text(s.clone()),
            // Nested structures are stored as their JSON text.
            other => SqlValue::Text(other.to_string()),
        }
    }

    /// Whether this guard value is older than `other`: numbers by value,
    /// text (ISO-8601 timestamps) by its order.
    pub fn is_older_than(&self, other: &SqlValue) -> bool {
        use SqlValue::*;
        match (self, other) {
            (Int(a), Int(b)) => a < b,
            (Int(a), Float(b)) => (*a as f64) < *b,
            (Float(a), Int(b)) => *a < *b as f64,
            (Float(a), Float(b)) => a < b,
            (Text(a), Text(b)) => a < b,
            (Bool(a), Bool(b)) => a < b,
            _ => false,
        }
    }

    /// The column kind `auto.create` gives this value.
    pub fn kind(&self) -> Option<ColumnKind> {
        match self {
            SqlValue::Null => None,
            SqlValue::Int(_) => Some(ColumnKind::Int),
            SqlValue::Float(_) => Some(ColumnKind::Float),
            SqlValue::Bool(_) => Some(ColumnKind::Bool),
            SqlValue::Text(_) => Some(ColumnKind::Text),
        }
    }

    /// Converts to the column's kind where no information is lost.
    pub fn coerce(self, kind: ColumnKind) -> Result<SqlValue, String> {
        use SqlValue::*;
        Ok(match (self, kind) {
            (Null, _) => Null,
            (Int(i), ColumnKind::Int) => Int(i),
            (Int(i), ColumnKind::Float) => Float(i as f64),
            (Int(i), ColumnKind::Text) => Text(i.to_string()),
            (Int(i @ (0 | 1)), ColumnKind::Bool) => Bool(i == 1),
            (Float(f), ColumnKind::Float) => Float(f),
            (Float(f), ColumnKind::Int) if f.fract() == 0.0 && f.abs() < 9.0e15 => Int(f as i64),
            (Float(f), ColumnKind::Text) => Text(f.to_string()),
            (Bool(b), ColumnKind::Bool) => Bool(b),
            (Bool(b), ColumnKind::Int) => Int(i64::from(b)),
            (Bool(b), ColumnKind::Text) => Text(b.to_string()),
            (Text(s), ColumnKind::Text) => Text(s),
            (Text(s), ColumnKind::Int) => Int(s
                .trim()
                .parse()
                .map_err(|_| format!("`{s}` is not an integer"))?),
            (Text(s), ColumnKind::Float) => Float(
                s.trim()
                    .parse()
                    .map_err(|_| format!("`{s}` is not a number"))?,
            ),
            (Text(s), ColumnKind::Bool) => match s.trim() {
                "true" => Bool(true),
                "false" => Bool(false),
                _ => return Err(format!("`{s}` is not a boolean")),
            },
            (v, k) => return Err(format!("{v:?} does not fit a {k:?} column")),
        })
    }
}
