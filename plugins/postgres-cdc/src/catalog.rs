//! What the connector asks PostgreSQL over a plain SQL connection: the
//! server's settings, the captured tables and their columns, the
//! publication, the replication slot's state.

use sluice_sdk::ConnectError;
use sqlx::{Connection, PgConnection, Row};

use crate::config::{CdcConfig, PublicationAutocreate};
use crate::lsn::Lsn;
use crate::types::PgType;

/// A column as the catalog describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnInfo {
    pub name: String,
    pub ty: PgType,
    pub type_oid: u32,
    pub type_modifier: i32,
    pub nullable: bool,
}

/// A captured table.
#[derive(Debug, Clone, PartialEq)]
pub struct TableInfo {
    pub oid: u32,
    pub schema: String,
    pub name: String,
    pub columns: Vec<ColumnInfo>,
    /// The primary key's columns, in key order (empty: no primary key).
    pub primary_key: Vec<String>,
    /// `pg_class.relreplident`: d (default), n (nothing), f (full), i (index).
    pub replica_identity: char,
}

impl TableInfo {
    pub fn full_name(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }

    /// What `before` holds for this table's updates and deletes, for the
    /// log when streaming starts.
    pub fn before_image(&self) -> String {
        match (self.replica_identity, self.primary_key.is_empty()) {
            ('f', _) => "the whole old row (REPLICA IDENTITY FULL)".into(),
            ('d', false) => format!(
                "null for updates and only the key ({}) for deletes (REPLICA IDENTITY DEFAULT; ALTER TABLE {} REPLICA IDENTITY FULL for whole old rows)",
                self.primary_key.join(", "),
                self.full_name()
            ),
            ('i', _) => "null for updates and only the replica identity index's columns for deletes (REPLICA IDENTITY USING INDEX)".into(),
            _ => format!(
                "nothing: the table has no replica identity, so PostgreSQL refuses its updates and deletes while it is published (ALTER TABLE {} REPLICA IDENTITY FULL, or add a primary key)",
                self.full_name()
            ),
        }
    }
}

/// Failures talking to PostgreSQL: a lost or refused connection is worth
/// retrying; anything else says what failed.
pub fn sql_error(what: &str, e: sqlx::Error) -> ConnectError {
    match &e {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::WorkerCrashed => {
            ConnectError::retriable(format!("{what}: {e}")).with_class("DatabaseUnavailable")
        }
        sqlx::Error::Database(db) if is_transient_sqlstate(db.code().as_deref()) => {
            ConnectError::retriable(format!("{what}: {e}")).with_class("DatabaseUnavailable")
        }
        _ => ConnectError::fatal(format!("{what}: {e}")).with_class("DatabaseError"),
    }
}

fn is_transient_sqlstate(code: Option<&str>) -> bool {
    // Class 08 (connection), 57P (operator intervention: shutdown), 53
    // (insufficient resources), 40001/40P01 (serialization, deadlock).
    code.is_some_and(|c| {
        c.starts_with("08")
            || c.starts_with("57P")
            || c.starts_with("53")
            || c == "40001"
            || c == "40P01"
    })
}

pub async fn connect(cfg: &CdcConfig) -> Result<PgConnection, ConnectError> {
    let options = cfg.sql_options();
    let connect = PgConnection::connect_with(&options);
    match tokio::time::timeout(
        std::time::Duration::from_millis(cfg.connect_timeout_ms),
        connect,
    )
    .await
    {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(sql_error(
            &format!(
                "connecting to PostgreSQL at {}:{} (database `{}`)",
                cfg.hostname, cfg.port, cfg.dbname
            ),
            e,
        )),
        Err(_) => Err(ConnectError::retriable(format!(
            "connecting to PostgreSQL at {}:{}: no answer within {} ms",
            cfg.hostname, cfg.port, cfg.connect_timeout_ms
        ))
        .with_class("DatabaseUnavailable")),
    }
}

/// Logical decoding needs `wal_level=logical`; say so before anything else.
pub async fn check_server(conn: &mut PgConnection) -> Result<(), ConnectError> {
    let level: String = sqlx::query_scalar("SELECT current_setting('wal_level')")
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| sql_error("reading wal_level", e))?;
    if level != "logical" {
        return Err(ConnectError::fatal(format!(
            "PostgreSQL runs with wal_level={level}; change data capture needs wal_level=logical (set it in postgresql.conf and restart the server)"
        ))
        .with_class("ConfigException"));
    }
    Ok(())
}

/// The ordinary and partitioned tables the filter captures.
pub async fn captured_tables(
    conn: &mut PgConnection,
    cfg: &CdcConfig,
) -> Result<Vec<(u32, String, String)>, ConnectError> {
    let rows = sqlx::query(
        "SELECT c.oid::int8, n.nspname::text, c.relname::text
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
         ORDER BY n.nspname, c.relname",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(|e| sql_error("listing tables", e))?;
    Ok(rows
        .into_iter()
        .map(|r| (r.get::<i64, _>(0) as u32, r.get(1), r.get(2)))
        .filter(|(_, s, t): &(u32, String, String)| cfg.tables.captures(s, t))
        .collect())
}

/// A table's columns, primary key and replica identity, by OID. `None`:
/// the table no longer exists.
pub async fn table_info(
    conn: &mut PgConnection,
    oid: u32,
) -> Result<Option<TableInfo>, ConnectError> {
    let Some(head) = sqlx::query(
        "SELECT n.nspname::text, c.relname::text, c.relreplident::text
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1::int8::oid",
    )
    .bind(oid as i64)
    .fetch_optional(&mut *conn)
    .await
    .map_err(|e| sql_error("reading a table's catalog entry", e))?
    else {
        return Ok(None);
    };
    let columns = sqlx::query(
        "SELECT a.attname::text, a.atttypid::int8, a.atttypmod, NOT a.attnotnull,
                COALESCE(t.typtype::text, 'b'), COALESCE(t.typbasetype::int8, 0), t.typtypmod
         FROM pg_attribute a LEFT JOIN pg_type t ON t.oid = a.atttypid
         WHERE a.attrelid = $1::int8::oid AND a.attnum > 0 AND NOT a.attisdropped
         ORDER BY a.attnum",
    )
    .bind(oid as i64)
    .fetch_all(&mut *conn)
    .await
    .map_err(|e| sql_error("reading a table's columns", e))?
    .into_iter()
    .map(|r| {
        let mut type_oid = r.get::<i64, _>(1) as u32;
        let mut typmod: i32 = r.get(2);
        // A domain is read as its base type.
        if r.get::<String, _>(4) == "d" {
            type_oid = r.get::<i64, _>(5) as u32;
            typmod = r.get::<Option<i32>, _>(6).unwrap_or(-1);
        }
        ColumnInfo {
            name: r.get(0),
            ty: PgType::from_oid(type_oid, typmod),
            type_oid,
            type_modifier: typmod,
            nullable: r.get(3),
        }
    })
    .collect();
    let primary_key: Vec<String> = sqlx::query_scalar(
        "SELECT a.attname::text
         FROM pg_index i
         JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) ON true
         JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
         WHERE i.indrelid = $1::int8::oid AND i.indisprimary
         ORDER BY k.ord",
    )
    .bind(oid as i64)
    .fetch_all(&mut *conn)
    .await
    .map_err(|e| sql_error("reading a table's primary key", e))?;
    let identity: String = head.get(2);
    Ok(Some(TableInfo {
        oid,
        schema: head.get(0),
        name: head.get(1),
        columns,
        primary_key,
        replica_identity: identity.chars().next().unwrap_or('d'),
    }))
}

fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

pub fn qualified(schema: &str, table: &str) -> String {
    format!("{}.{}", quote_ident(schema), quote_ident(table))
}

/// Creates the publication if it is missing (as `publication.autocreate.mode`
/// says), and checks that it publishes every captured table.
pub async fn ensure_publication(
    conn: &mut PgConnection,
    cfg: &CdcConfig,
    tables: &[(u32, String, String)],
) -> Result<(), ConnectError> {
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)")
            .bind(&cfg.publication)
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| sql_error("reading publications", e))?;
    let list = tables
        .iter()
        .map(|(_, s, t)| qualified(s, t))
        .collect::<Vec<_>>()
        .join(", ");
    let name = quote_ident(&cfg.publication);
    match (exists, cfg.publication_autocreate) {
        (false, PublicationAutocreate::Disabled) => {
            return Err(ConnectError::fatal(format!(
                "publication `{}` does not exist and publication.autocreate.mode=disabled: create it (CREATE PUBLICATION {} FOR TABLE ...) or let the connector create it",
                cfg.publication, name
            ))
            .with_class("ConfigException"));
        }
        (false, PublicationAutocreate::AllTables) => {
            sqlx::query(&format!("CREATE PUBLICATION {name} FOR ALL TABLES"))
                .execute(&mut *conn)
                .await
                .map_err(|e| {
                    sql_error(
                        &format!("creating publication `{}` for all tables", cfg.publication),
                        e,
                    )
                })?;
            tracing::info!(publication = %cfg.publication, "created publication for all tables");
        }
        (false, PublicationAutocreate::Filtered) => {
            if tables.is_empty() {
                return Err(ConnectError::fatal(
                    "publication.autocreate.mode=filtered, but the table lists capture no table: there is nothing to publish",
                )
                .with_class("ConfigException"));
            }
            sqlx::query(&format!("CREATE PUBLICATION {name} FOR TABLE {list}"))
                .execute(&mut *conn)
                .await
                .map_err(|e| {
                    sql_error(&format!("creating publication `{}`", cfg.publication), e)
                })?;
            tracing::info!(publication = %cfg.publication, tables = %list, "created publication");
        }
        (true, PublicationAutocreate::Filtered) if !tables.is_empty() => {
            // As Debezium: a filtered publication follows the table lists.
            sqlx::query(&format!("ALTER PUBLICATION {name} SET TABLE {list}"))
                .execute(&mut *conn)
                .await
                .map_err(|e| {
                    sql_error(&format!("updating publication `{}`", cfg.publication), e)
                })?;
        }
        (true, _) => {}
    }
    let published: Vec<(String, String)> = sqlx::query_as(
        "SELECT schemaname::text, tablename::text FROM pg_publication_tables WHERE pubname = $1",
    )
    .bind(&cfg.publication)
    .fetch_all(&mut *conn)
    .await
    .map_err(|e| sql_error("reading the publication's tables", e))?;
    let missing: Vec<String> = tables
        .iter()
        .filter(|(_, s, t)| !published.iter().any(|(ps, pt)| ps == s && pt == t))
        .map(|(_, s, t)| format!("{s}.{t}"))
        .collect();
    if !missing.is_empty() {
        return Err(ConnectError::fatal(format!(
            "publication `{}` does not publish {} that the connector captures: add them (ALTER PUBLICATION {} ADD TABLE ...) or leave them out of table.include.list",
            cfg.publication,
            missing.join(", "),
            name
        ))
        .with_class("ConfigException"));
    }
    Ok(())
}

/// A replication slot as `pg_replication_slots` shows it.
#[derive(Debug, Clone)]
pub struct SlotState {
    pub plugin: Option<String>,
    pub database: Option<String>,
    pub active_pid: Option<i32>,
    pub confirmed_flush: Option<Lsn>,
    /// `reserved`, `extended`, `unreserved` or `lost`.
    pub wal_status: Option<String>,
}

pub async fn slot_state(
    conn: &mut PgConnection,
    slot: &str,
) -> Result<Option<SlotState>, ConnectError> {
    let row = sqlx::query(
        "SELECT plugin::text, database::text, active_pid, confirmed_flush_lsn::text, wal_status
         FROM pg_replication_slots WHERE slot_name = $1",
    )
    .bind(slot)
    .fetch_optional(&mut *conn)
    .await
    .map_err(|e| sql_error("reading the replication slot", e))?;
    Ok(row.map(|r| SlotState {
        plugin: r.get(0),
        database: r.get(1),
        active_pid: r.get(2),
        confirmed_flush: r.get::<Option<String>, _>(3).and_then(|s| Lsn::parse(&s)),
        wal_status: r.get(4),
    }))
}

/// Drops the slot once no connection holds it. The server releases a slot
/// when it notices its replication connection closed, a moment after the
/// client closed it, and `pg_drop_replication_slot` refuses an active slot
/// rather than waiting; a slot already gone is not an error.
pub async fn drop_slot(
    conn: &mut PgConnection,
    slot: &str,
    wait_for_release: std::time::Duration,
) -> Result<(), ConnectError> {
    let deadline = tokio::time::Instant::now() + wait_for_release;
    loop {
        let Some(state) = slot_state(conn, slot).await? else {
            return Ok(());
        };
        if let Some(pid) = state.active_pid {
            if tokio::time::Instant::now() >= deadline {
                return Err(ConnectError::retriable(format!(
                    "replication slot `{slot}` is still in use by PostgreSQL process {pid} after {wait_for_release:?}: drop it by hand once that connection ends (SELECT pg_drop_replication_slot('{slot}'))"
                ))
                .with_class("SlotInUse"));
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        }
        // Inactive now, but another connection may take it between the
        // check and the drop: then the loop looks again.
        match sqlx::query("SELECT pg_drop_replication_slot($1)")
            .bind(slot)
            .execute(&mut *conn)
            .await
        {
            Ok(_) => return Ok(()),
            Err(sqlx::Error::Database(e))
                if e.code().as_deref() == Some("55006")
                    && tokio::time::Instant::now() < deadline => {}
            Err(e) => return Err(sql_error(&format!("dropping replication slot `{slot}`"), e)),
        }
    }
}

/// How many bytes of WAL the slot holds back: the server's current
/// position less what the connector confirmed.
pub async fn slot_lag_bytes(
    conn: &mut PgConnection,
    slot: &str,
) -> Result<Option<i64>, ConnectError> {
    sqlx::query_scalar(
        "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::int8
         FROM pg_replication_slots WHERE slot_name = $1",
    )
    .bind(slot)
    .fetch_optional(&mut *conn)
    .await
    .map(Option::flatten)
    .map_err(|e| sql_error("measuring the slot's lag", e))
}
