//! The SQL each database needs: identifier quoting, types, DDL, and the
//! batched write statements. Pure string building, so it is unit-tested
//! without a server; `db.rs` runs it.

use crate::value::ColumnKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
    MySql,
}

/// What a write statement does with each row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    Insert,
    Upsert,
    Update,
}

/// The shape of one batched statement: a table, the columns written (the
/// same for every row), the key, and the guard column if any.
pub struct Shape<'a> {
    pub table: &'a str,
    pub names: &'a [String],
    pub pk: &'a [String],
    pub guard: Option<&'a str>,
}

impl Shape<'_> {
    /// The columns written that are not part of the key.
    fn non_key(&self) -> Vec<&String> {
        self.names.iter().filter(|n| !self.pk.contains(n)).collect()
    }
}

/// Alias of the target table in PostgreSQL statements, so conditions can
/// name its columns whatever the table is called.
const TARGET: &str = "sluice_t";

/// Most bind parameters per statement, under each database's limit
/// (PostgreSQL binds one array per column, so it has none here).
pub const SQLITE_MAX_PARAMS: usize = 32_000;
pub const MYSQL_MAX_PARAMS: usize = 65_000;

impl Dialect {
    pub fn quote_ident(self, name: &str) -> String {
        match self {
            Dialect::MySql => format!("`{}`", name.replace('`', "``")),
            Dialect::Sqlite | Dialect::Postgres => format!("\"{}\"", name.replace('"', "\"\"")),
        }
    }

    /// `schema.table` is quoted part by part; anything else as one identifier.
    pub fn quote_table(self, name: &str) -> String {
        name.split('.')
            .map(|p| self.quote_ident(p))
            .collect::<Vec<_>>()
            .join(".")
    }

    fn quoted(self, names: &[String]) -> Vec<String> {
        names.iter().map(|n| self.quote_ident(n)).collect()
    }

    /// The column type `auto.create` and `auto.evolve` give a kind of value.
    /// MySQL cannot index TEXT without a length, so key columns are VARCHAR.
    pub fn type_name(self, kind: ColumnKind, is_key: bool) -> &'static str {
        match (self, kind) {
            (Dialect::Sqlite, ColumnKind::Int) => "INTEGER",
            (Dialect::Sqlite, ColumnKind::Float) => "REAL",
            (Dialect::Postgres | Dialect::MySql, ColumnKind::Int) => "BIGINT",
            (Dialect::Postgres, ColumnKind::Float) => "DOUBLE PRECISION",
            (Dialect::MySql, ColumnKind::Float) => "DOUBLE",
            (Dialect::Sqlite | Dialect::Postgres, ColumnKind::Decimal) => "NUMERIC",
            (Dialect::MySql, ColumnKind::Decimal) => "DECIMAL(65,30)",
            (_, ColumnKind::Bool) => "BOOLEAN",
            (Dialect::MySql, ColumnKind::Text) if is_key => "VARCHAR(255)",
            (_, ColumnKind::Text) => "TEXT",
            (Dialect::Sqlite, ColumnKind::Bytes) => "BLOB",
            (Dialect::Postgres, ColumnKind::Bytes) => "BYTEA",
            (Dialect::MySql, ColumnKind::Bytes) if is_key => "VARBINARY(255)",
            (Dialect::MySql, ColumnKind::Bytes) => "LONGBLOB",
        }
    }

    /// `columns` are `(name, declared type)`.
    pub fn create_table(self, table: &str, columns: &[(String, String)], pk: &[String]) -> String {
        let mut defs: Vec<String> = columns
            .iter()
            .map(|(name, ty)| {
                let not_null = if pk.contains(name) { " NOT NULL" } else { "" };
                format!("{} {ty}{not_null}", self.quote_ident(name))
            })
            .collect();
        if !pk.is_empty() {
            defs.push(format!("PRIMARY KEY ({})", self.quoted(pk).join(", ")));
        }
        format!(
            "CREATE TABLE IF NOT EXISTS {} ({})",
            self.quote_table(table),
            defs.join(", ")
        )
    }

    /// A new nullable column (`auto.evolve`).
    pub fn add_column(self, table: &str, column: &str, sql_type: &str) -> String {
        format!(
            "ALTER TABLE {} ADD COLUMN {} {sql_type}",
            self.quote_table(table),
            self.quote_ident(column)
        )
    }

    /// `{qualifier}c = u.c` for each column: assignments and key matches
    /// from the source rows, which every statement aliases `u`.
    fn matching_source<'a>(
        self,
        columns: impl IntoIterator<Item = &'a String>,
        qualifier: &str,
    ) -> Vec<String> {
        columns
            .into_iter()
            .map(|c| format!("{qualifier}{0} = u.{0}", self.quote_ident(c)))
            .collect()
    }

    /// Placeholder number `n` (1-based).
    fn param(self, n: usize) -> String {
        match self {
            Dialect::Sqlite => format!("?{n}"),
            Dialect::Postgres => format!("${n}"),
            Dialect::MySql => "?".into(),
        }
    }

    /// `(?1, ?2), (?3, ?4)` for `rows` rows of `width` values.
    fn value_rows(self, width: usize, rows: usize) -> String {
        let mut out = String::with_capacity(rows * width * 5);
        let mut n = 0;
        for r in 0..rows {
            if r > 0 {
                out.push_str(", ");
            }
            out.push('(');
            for c in 0..width {
                if c > 0 {
                    out.push_str(", ");
                }
                n += 1;
                out.push_str(&self.param(n));
            }
            out.push(')');
        }
        out
    }

    /// The guard condition: the stored row is older than the incoming one
    /// (or has no guard value). `old` and `new` qualify the two sides.
    fn guard_condition(self, guard: &str, old: &str, new: &str) -> String {
        let g = self.quote_ident(guard);
        format!("({old}.{g} IS NULL OR {old}.{g} < {new}.{g})")
    }

    /// SQLite and MySQL: one multi-row statement for `rows` rows, values
    /// bound row by row in `shape.names` order.
    pub fn values_write(self, shape: &Shape<'_>, mode: WriteMode, rows: usize) -> String {
        assert_ne!(self, Dialect::Postgres, "PostgreSQL writes through UNNEST");
        let table = self.quote_table(shape.table);
        let cols = self.quoted(shape.names);
        let others = shape.non_key();
        match mode {
            WriteMode::Insert | WriteMode::Upsert => {
                let mut sql = format!(
                    "INSERT INTO {table} ({}) VALUES {}",
                    cols.join(", "),
                    self.value_rows(cols.len(), rows)
                );
                if mode == WriteMode::Upsert {
                    sql.push_str(&self.on_conflict(shape, &table, &others));
                }
                sql
            }
            WriteMode::Update => match self {
                Dialect::Sqlite => {
                    let sets = self.matching_source(others, "");
                    let mut cond = self.matching_source(shape.pk, &format!("{table}."));
                    if let Some(g) = shape.guard {
                        cond.push(self.guard_condition(g, &table, "u"));
                    }
                    format!(
                        "WITH u({}) AS (VALUES {}) UPDATE {table} SET {} FROM u WHERE {}",
                        cols.join(", "),
                        self.value_rows(cols.len(), rows),
                        sets.join(", "),
                        cond.join(" AND ")
                    )
                }
                Dialect::MySql => {
                    let first: Vec<String> = cols.iter().map(|c| format!("? AS {c}")).collect();
                    let rest = vec!["?"; cols.len()].join(", ");
                    let mut source = format!("SELECT {}", first.join(", "));
                    for _ in 1..rows {
                        source.push_str(&format!(" UNION ALL SELECT {rest}"));
                    }
                    let on = self.matching_source(shape.pk, &format!("{table}."));
                    let sets = self.matching_source(others, &format!("{table}."));
                    let mut sql = format!(
                        "UPDATE {table} JOIN ({source}) AS u ON {} SET {}",
                        on.join(" AND "),
                        sets.join(", ")
                    );
                    if let Some(g) = shape.guard {
                        sql.push_str(&format!(" WHERE {}", self.guard_condition(g, &table, "u")));
                    }
                    sql
                }
                Dialect::Postgres => unreachable!(),
            },
        }
    }

    /// The upsert clause of SQLite and MySQL.
    fn on_conflict(self, shape: &Shape<'_>, table: &str, others: &[&String]) -> String {
        match self {
            Dialect::Sqlite => {
                let target = self.quoted(shape.pk).join(", ");
                if others.is_empty() {
                    return format!(" ON CONFLICT ({target}) DO NOTHING");
                }
                let sets: Vec<String> = others
                    .iter()
                    .map(|n| format!("{0} = excluded.{0}", self.quote_ident(n)))
                    .collect();
                let mut sql = format!(" ON CONFLICT ({target}) DO UPDATE SET {}", sets.join(", "));
                if let Some(g) = shape.guard {
                    sql.push_str(&format!(
                        " WHERE {}",
                        self.guard_condition(g, table, "excluded")
                    ));
                }
                sql
            }
            Dialect::MySql => {
                if others.is_empty() {
                    let k = self.quote_ident(&shape.pk[0]);
                    return format!(" ON DUPLICATE KEY UPDATE {k} = {k}");
                }
                let sets: Vec<String> = match shape.guard {
                    None => others
                        .iter()
                        .map(|n| format!("{0} = VALUES({0})", self.quote_ident(n)))
                        .collect(),
                    Some(g) => {
                        // MySQL assigns left to right: the guard column goes
                        // last so every condition sees its stored value.
                        let gq = self.quote_ident(g);
                        let newer = format!("({gq} IS NULL OR {gq} < VALUES({gq}))");
                        let mut ordered: Vec<&String> =
                            others.iter().copied().filter(|n| *n != g).collect();
                        ordered.extend(others.iter().copied().filter(|n| *n == g));
                        ordered
                            .iter()
                            .map(|n| {
                                let c = self.quote_ident(n);
                                format!("{c} = IF({newer}, VALUES({c}), {c})")
                            })
                            .collect()
                    }
                };
                format!(" ON DUPLICATE KEY UPDATE {}", sets.join(", "))
            }
            Dialect::Postgres => unreachable!(),
        }
    }

    /// PostgreSQL: one statement per batch whatever its size, one array
    /// parameter per column (`arrays` are their element types: int8,
    /// float8, bool or text), each value cast to its column's type.
    pub fn unnest_write(
        self,
        shape: &Shape<'_>,
        mode: WriteMode,
        arrays: &[&str],
        casts: &[&str],
    ) -> String {
        assert_eq!(self, Dialect::Postgres);
        let table = self.quote_table(shape.table);
        let cols = self.quoted(shape.names);
        let source = unnest_source(&cols, arrays, casts);
        let others = shape.non_key();
        let target = format!("\"{TARGET}\"");
        match mode {
            WriteMode::Insert | WriteMode::Upsert => {
                let mut sql = format!(
                    "INSERT INTO {table} AS {target} ({}) SELECT {} FROM ({source}) AS u",
                    cols.join(", "),
                    cols.iter()
                        .map(|c| format!("u.{c}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                if mode == WriteMode::Upsert {
                    let conflict = self.quoted(shape.pk).join(", ");
                    if others.is_empty() {
                        sql.push_str(&format!(" ON CONFLICT ({conflict}) DO NOTHING"));
                    } else {
                        let sets: Vec<String> = others
                            .iter()
                            .map(|n| format!("{0} = EXCLUDED.{0}", self.quote_ident(n)))
                            .collect();
                        sql.push_str(&format!(
                            " ON CONFLICT ({conflict}) DO UPDATE SET {}",
                            sets.join(", ")
                        ));
                        if let Some(g) = shape.guard {
                            sql.push_str(&format!(
                                " WHERE {}",
                                self.guard_condition(g, &target, "EXCLUDED")
                            ));
                        }
                    }
                }
                sql
            }
            WriteMode::Update => {
                let sets = self.matching_source(others, "");
                let mut cond = self.matching_source(shape.pk, &format!("{target}."));
                if let Some(g) = shape.guard {
                    cond.push(self.guard_condition(g, &target, "u"));
                }
                format!(
                    "UPDATE {table} AS {target} SET {} FROM ({source}) AS u WHERE {}",
                    sets.join(", "),
                    cond.join(" AND ")
                )
            }
        }
    }

    /// Deletes the rows with the given keys (`rows` keys of `pk.len()`
    /// values; PostgreSQL takes one array per key column instead).
    pub fn delete(
        self,
        table: &str,
        pk: &[String],
        rows: usize,
        pg_arrays: &[&str],
        pg_casts: &[&str],
    ) -> String {
        let t = self.quote_table(table);
        let keys = self.quoted(pk);
        match self {
            Dialect::Postgres => {
                let source = unnest_source(&keys, pg_arrays, pg_casts);
                let target = format!("\"{TARGET}\"");
                let cond = self.matching_source(pk, &format!("{target}."));
                format!(
                    "DELETE FROM {t} AS {target} USING ({source}) AS u WHERE {}",
                    cond.join(" AND ")
                )
            }
            Dialect::Sqlite | Dialect::MySql => {
                if keys.len() == 1 {
                    let params: Vec<String> = (1..=rows).map(|n| self.param(n)).collect();
                    format!(
                        "DELETE FROM {t} WHERE {} IN ({})",
                        keys[0],
                        params.join(", ")
                    )
                } else {
                    let list = if self == Dialect::Sqlite {
                        format!("VALUES {}", self.value_rows(keys.len(), rows))
                    } else {
                        self.value_rows(keys.len(), rows)
                    };
                    format!("DELETE FROM {t} WHERE ({}) IN ({list})", keys.join(", "))
                }
            }
        }
    }

    /// The exactly-once offsets table.
    pub fn create_offsets_table(self, table: &str) -> String {
        let q = |n: &str| self.quote_ident(n);
        format!(
            "CREATE TABLE IF NOT EXISTS {} ({} VARCHAR(255) NOT NULL, {} VARCHAR(255) NOT NULL, {} INTEGER NOT NULL, {} BIGINT NOT NULL, PRIMARY KEY ({}, {}, {}))",
            self.quote_table(table),
            q("connector"),
            q("topic"),
            q("partition"),
            q("offset"),
            q("connector"),
            q("topic"),
            q("partition"),
        )
    }

    /// Upserts `rows` offsets, bound as (connector, topic, partition, offset).
    pub fn store_offsets(self, table: &str, rows: usize) -> String {
        let q = |n: &str| self.quote_ident(n);
        let mut sql = format!(
            "INSERT INTO {} ({}, {}, {}, {}) VALUES {}",
            self.quote_table(table),
            q("connector"),
            q("topic"),
            q("partition"),
            q("offset"),
            self.value_rows(4, rows)
        );
        match self {
            Dialect::MySql => sql.push_str(&format!(
                " ON DUPLICATE KEY UPDATE {0} = VALUES({0})",
                q("offset")
            )),
            Dialect::Sqlite | Dialect::Postgres => sql.push_str(&format!(
                " ON CONFLICT ({}, {}, {}) DO UPDATE SET {3} = excluded.{3}",
                q("connector"),
                q("topic"),
                q("partition"),
                q("offset")
            )),
        }
        sql
    }

    /// Every offset of a connector, bound as (connector).
    pub fn load_offsets(self, table: &str) -> String {
        let q = |n: &str| self.quote_ident(n);
        format!(
            "SELECT {}, {}, {} FROM {} WHERE {} = {}",
            q("topic"),
            q("partition"),
            q("offset"),
            self.quote_table(table),
            q("connector"),
            self.param(1)
        )
    }

    /// Moves one partition's offset forward only if it is not past where
    /// the batch began, and never back, bound as (next, connector, topic,
    /// partition, first, next).
    pub fn advance_offset(self, table: &str) -> String {
        let q = |n: &str| self.quote_ident(n);
        format!(
            "UPDATE {} SET {} = {} WHERE {} = {} AND {} = {} AND {} = {} AND {} <= {} AND {} < {}",
            self.quote_table(table),
            q("offset"),
            self.param(1),
            q("connector"),
            self.param(2),
            q("topic"),
            self.param(3),
            q("partition"),
            self.param(4),
            q("offset"),
            self.param(5),
            q("offset"),
            self.param(6)
        )
    }

    /// PostgreSQL: [`Dialect::advance_offset`] for every partition of a
    /// commit in one statement, bound as (connector, topics, partitions,
    /// firsts, nexts) arrays; returns the (topic, partition) of each row
    /// it moved.
    pub fn advance_offsets(self, table: &str) -> String {
        assert_eq!(self, Dialect::Postgres);
        let q = |n: &str| self.quote_ident(n);
        let (topic, partition, offset) = (q("topic"), q("partition"), q("offset"));
        format!(
            "UPDATE {} AS s SET {offset} = b.next \
             FROM unnest($2::text[], $3::int4[], $4::int8[], $5::int8[]) AS b(topic, part, first, next) \
             WHERE s.{} = $1 AND s.{topic} = b.topic AND s.{partition} = b.part \
             AND s.{offset} <= b.first AND s.{offset} < b.next \
             RETURNING s.{topic}::text, s.{partition}",
            self.quote_table(table),
            q("connector"),
        )
    }

    /// PostgreSQL: the first offset of several partitions in one
    /// statement, bound as (connector, topics, partitions, nexts) arrays;
    /// returns the (topic, partition) of each row inserted. A key another
    /// task stored (or is storing: the insert waits for its transaction)
    /// is left out.
    pub fn insert_offsets(self, table: &str) -> String {
        assert_eq!(self, Dialect::Postgres);
        let q = |n: &str| self.quote_ident(n);
        let (topic, partition) = (q("topic"), q("partition"));
        format!(
            "INSERT INTO {} ({}, {topic}, {partition}, {}) \
             SELECT $1, b.topic, b.part, b.next \
             FROM unnest($2::text[], $3::int4[], $4::int8[]) AS b(topic, part, next) \
             ON CONFLICT DO NOTHING RETURNING {topic}::text, {partition}",
            self.quote_table(table),
            q("connector"),
            q("offset"),
        )
    }

    /// A partition's first offset, bound as (connector, topic, partition,
    /// offset); fails on the key if another task stored one meanwhile.
    pub fn insert_offset(self, table: &str) -> String {
        let q = |n: &str| self.quote_ident(n);
        format!(
            "INSERT INTO {} ({}, {}, {}, {}) VALUES ({})",
            self.quote_table(table),
            q("connector"),
            q("topic"),
            q("partition"),
            q("offset"),
            (1..=4)
                .map(|i| self.param(i))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }

    /// Forgets one partition's offset, bound as (connector, topic, partition).
    pub fn delete_offset(self, table: &str) -> String {
        let q = |n: &str| self.quote_ident(n);
        format!(
            "DELETE FROM {} WHERE {} = {} AND {} = {} AND {} = {}",
            self.quote_table(table),
            q("connector"),
            self.param(1),
            q("topic"),
            self.param(2),
            q("partition"),
            self.param(3)
        )
    }
}

/// `SELECT (x.c1)::numeric AS "amount", ... FROM UNNEST($1::float8[], ...) AS x(c1, ...)`
fn unnest_source(cols: &[String], arrays: &[&str], casts: &[&str]) -> String {
    let selected: Vec<String> = cols
        .iter()
        .enumerate()
        .map(|(i, c)| format!("(x.c{})::{} AS {c}", i + 1, casts[i]))
        .collect();
    let params: Vec<String> = arrays
        .iter()
        .enumerate()
        .map(|(i, a)| format!("${}::{a}[]", i + 1))
        .collect();
    let aliases: Vec<String> = (1..=cols.len()).map(|i| format!("c{i}")).collect();
    format!(
        "SELECT {} FROM UNNEST({}) AS x({})",
        selected.join(", "),
        params.join(", "),
        aliases.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn sqlite_upsert_with_guard_and_quoting() {
        let cols = names(&["id", "Amount", "updated_at"]);
        let pk = names(&["id"]);
        let shape = Shape {
            table: "order",
            names: &cols,
            pk: &pk,
            guard: Some("updated_at"),
        };
        assert_eq!(
            Dialect::Sqlite.values_write(&shape, WriteMode::Upsert, 2),
            "INSERT INTO \"order\" (\"id\", \"Amount\", \"updated_at\") VALUES (?1, ?2, ?3), (?4, ?5, ?6) \
             ON CONFLICT (\"id\") DO UPDATE SET \"Amount\" = excluded.\"Amount\", \"updated_at\" = excluded.\"updated_at\" \
             WHERE (\"order\".\"updated_at\" IS NULL OR \"order\".\"updated_at\" < excluded.\"updated_at\")"
        );
    }

    #[test]
    fn mysql_guard_assigns_the_guard_column_last() {
        let cols = names(&["id", "updated_at", "v"]);
        let pk = names(&["id"]);
        let shape = Shape {
            table: "t",
            names: &cols,
            pk: &pk,
            guard: Some("updated_at"),
        };
        let sql = Dialect::MySql.values_write(&shape, WriteMode::Upsert, 1);
        let v = sql.find("`v` = IF(").unwrap();
        let g = sql.find("`updated_at` = IF(").unwrap();
        assert!(v < g, "{sql}");
        assert!(sql.starts_with(
            "INSERT INTO `t` (`id`, `updated_at`, `v`) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE"
        ));
    }

    #[test]
    fn postgres_unnest_casts_each_column() {
        let cols = names(&["id", "amount"]);
        let pk = names(&["id"]);
        let shape = Shape {
            table: "s.Orders",
            names: &cols,
            pk: &pk,
            guard: None,
        };
        assert_eq!(
            Dialect::Postgres.unnest_write(
                &shape,
                WriteMode::Upsert,
                &["int8", "float8"],
                &["bigint", "numeric(10,2)"]
            ),
            "INSERT INTO \"s\".\"Orders\" AS \"sluice_t\" (\"id\", \"amount\") SELECT u.\"id\", u.\"amount\" FROM \
             (SELECT (x.c1)::bigint AS \"id\", (x.c2)::numeric(10,2) AS \"amount\" FROM UNNEST($1::int8[], $2::float8[]) AS x(c1, c2)) AS u \
             ON CONFLICT (\"id\") DO UPDATE SET \"amount\" = EXCLUDED.\"amount\""
        );
    }

    #[test]
    fn deletes_by_single_and_composite_keys() {
        assert_eq!(
            Dialect::Sqlite.delete("t", &names(&["id"]), 2, &[], &[]),
            "DELETE FROM \"t\" WHERE \"id\" IN (?1, ?2)"
        );
        assert_eq!(
            Dialect::MySql.delete("t", &names(&["a", "b"]), 2, &[], &[]),
            "DELETE FROM `t` WHERE (`a`, `b`) IN ((?, ?), (?, ?))"
        );
    }
}
