//! The task: a consistent snapshot (from the slot's exported snapshot),
//! then the slot's changes, each as Debezium's change event.
//!
//! Positions. Every event's offset holds its own LSN (`lsn_proc`) and its
//! transaction's commit LSN (`lsn_commit`); PostgreSQL sends transactions
//! whole, in commit order, and changes within one in LSN order, so
//! `(lsn_commit, lsn_proc)` only grows. After the runtime has committed a
//! batch (records and offsets in Kafka), the slot is told `lsn_commit` of
//! its last event: PostgreSQL then resends from that transaction on (it
//! skips only transactions that committed before), and the events already
//! in Kafka are skipped by position. So a restart, or a lost replication
//! connection, repeats nothing and loses nothing, and no WAL is freed that
//! Kafka does not hold yet.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use pg_walstream::{
    CancellationToken, LogicalReplicationMessage, LogicalReplicationParser,
    LogicalReplicationStream, ReplicationError, ReplicationSlotOptions, ReplicationStreamConfig,
    RetryConfig, StreamingMode,
};
use serde_json::json;
use sluice_sdk::{ConnectError, SourceGauge, SourceOffsets, SourceRecord, SourceTask, TaskContext};
use sqlx::{Connection, PgConnection, Row};

use crate::catalog::{self, ColumnInfo, TableInfo, sql_error};
use crate::config::{CdcConfig, SnapshotMode};
use crate::envelope::{ColumnText, EventWriter, Op, RowText, SourcePosition, Table, heartbeat};
use crate::lsn::Lsn;
use crate::types::Form;

/// PostgreSQL's epoch (2000-01-01) in Unix microseconds.
const PG_EPOCH_US: i64 = 946_684_800_000_000;
/// After the first event of a poll, how long to wait for more before
/// handing the batch over.
const LINGER: Duration = Duration::from_millis(20);
/// How long dropping a slot waits for the server to release it after its
/// replication connection closed.
const SLOT_RELEASE_WAIT: Duration = Duration::from_secs(10);

/// Where the connector is: the last event handed to the runtime.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Position {
    /// The commit LSN of the last event's transaction (or a heartbeat's
    /// LSN): transactions that committed before it are all in Kafka.
    commit: Lsn,
    /// The last event's own LSN within that transaction (0: none of it).
    proc: Lsn,
}

impl Position {
    fn from_offset(offset: &serde_json::Value) -> Option<Position> {
        let commit = offset.get("lsn_commit").and_then(|v| v.as_u64())?;
        let proc = offset.get("lsn_proc").and_then(|v| v.as_u64()).unwrap_or(0);
        Some(Position {
            commit: Lsn(commit),
            proc: Lsn(proc),
        })
    }

    /// Whether an event of the transaction committing at `commit`, at
    /// `lsn`, is already in Kafka.
    fn covers(&self, commit: Lsn, lsn: Lsn) -> bool {
        commit < self.commit || (commit == self.commit && lsn <= self.proc)
    }
}

struct Transaction {
    xid: u32,
    commit: Lsn,
    ts_us: i64,
}

/// The snapshot in progress: a REPEATABLE READ transaction that imported
/// the slot's exported snapshot, read table by table through a cursor.
struct Snapshot {
    conn: PgConnection,
    tables: Vec<Arc<Table>>,
    next_table: usize,
    cursor_open: bool,
    consistent_point: Lsn,
    ts_us: i64,
    emitted: u64,
    /// The last row read, held back until the next one shows whether it
    /// was the last of its table or of the snapshot.
    held: Option<HeldRow>,
}

struct HeldRow {
    table: Arc<Table>,
    row: RowText,
    first_in_table: bool,
    last_in_table: bool,
}

enum Phase {
    Start,
    Snapshot(Box<Snapshot>),
    Stream,
    Done,
}

pub struct CdcTask {
    cfg: CdcConfig,
    context: TaskContext,
    stored: Option<serde_json::Value>,
    phase: Phase,
    sql: Option<PgConnection>,
    /// Relation OID to its table (`None`: not captured).
    tables: HashMap<u32, Option<Arc<Table>>>,
    stream: Option<LogicalReplicationStream>,
    parser: LogicalReplicationParser,
    txn: Option<Transaction>,
    /// Where the last transaction streamed since the start ended (its
    /// commit's end LSN): the first half of Debezium's `source.sequence`.
    last_commit_end: Option<Lsn>,
    /// The last event handed over.
    position: Position,
    /// What the slot may be told at the next commit.
    confirmable: Option<Lsn>,
    last_heartbeat: Instant,
    stopping: bool,
    /// WAL the slot holds back, in bytes, as last measured.
    slot_lag: Option<i64>,
    lag_measured: Option<Instant>,
}

impl CdcTask {
    pub fn new(cfg: CdcConfig, context: TaskContext, offsets: SourceOffsets) -> CdcTask {
        let key = sluice_sdk::source_partition_key(&cfg.source_partition());
        CdcTask {
            stored: offsets.get(&key).cloned(),
            cfg,
            context,
            phase: Phase::Start,
            sql: None,
            tables: HashMap::new(),
            stream: None,
            parser: LogicalReplicationParser::with_protocol_version(1),
            txn: None,
            last_commit_end: None,
            position: Position::default(),
            confirmable: None,
            last_heartbeat: Instant::now(),
            stopping: false,
            slot_lag: None,
            lag_measured: None,
        }
    }

    fn writer(&self) -> EventWriter<'_> {
        let form = |schemas: bool| {
            if schemas {
                Form::Payload
            } else {
                Form::Schemaless
            }
        };
        EventWriter {
            cfg: &self.cfg,
            key_form: form(self.context.key_schemas),
            value_form: form(self.context.value_schemas),
            key_schemas: self.context.key_schemas,
            value_schemas: self.context.value_schemas,
        }
    }

    async fn sql(&mut self) -> Result<&mut PgConnection, ConnectError> {
        if self.sql.is_none() {
            self.sql = Some(catalog::connect(&self.cfg).await?);
        }
        Ok(self.sql.as_mut().expect("connected above"))
    }

    /// Decides between snapshot and stream from the stored offset and the
    /// slot, and checks that nothing was lost since.
    async fn start(&mut self) -> Result<(), ConnectError> {
        let cfg = self.cfg.clone();
        let conn = self.sql().await?;
        catalog::check_server(conn).await?;
        let captured = catalog::captured_tables(conn, &cfg).await?;
        if captured.is_empty() {
            tracing::warn!("the table lists capture no table; events will appear once one matches");
        }
        catalog::ensure_publication(conn, &cfg, &captured).await?;
        let slot = catalog::slot_state(conn, &cfg.slot).await?;
        if let Some(s) = &slot {
            if s.plugin.as_deref() != Some("pgoutput") || s.database.as_deref() != Some(&cfg.dbname)
            {
                return Err(ConnectError::fatal(format!(
                    "replication slot `{}` exists but is not a pgoutput slot of database `{}` (plugin {:?}, database {:?}): choose another slot.name",
                    cfg.slot, cfg.dbname, s.plugin, s.database
                ))
                .with_class("ConfigException"));
            }
            if let Some(pid) = s.active_pid {
                return Err(ConnectError::retriable(format!(
                    "replication slot `{}` is in use by another connection (PostgreSQL process {pid}); two connectors cannot share a slot",
                    cfg.slot
                ))
                .with_class("SlotInUse"));
            }
        }
        let stored = self.stored.clone();
        let snapshot_done = stored.as_ref().map(|o| {
            !o.get("snapshot").and_then(|v| v.as_bool()).unwrap_or(false)
                || o.get("last_snapshot_record")
                    .and_then(|v| v.as_bool())
                    .unwrap_or(false)
        });
        match (
            stored.as_ref().and_then(Position::from_offset),
            snapshot_done,
        ) {
            (Some(position), Some(true)) => {
                let Some(slot) = slot else {
                    return Err(ConnectError::fatal(format!(
                        "replication slot `{}` no longer exists: the changes after LSN {} (the last event in Kafka) are lost. To start over with a new snapshot, stop the connector and reset its offsets (DELETE /connectors/<name>/offsets)",
                        cfg.slot, position.commit
                    ))
                    .with_class("DataLoss"));
                };
                if slot.wal_status.as_deref() == Some("lost") {
                    return Err(ConnectError::fatal(format!(
                        "replication slot `{}` was invalidated: PostgreSQL removed WAL it still needed (max_slot_wal_keep_size), so the changes after LSN {} are lost. Reset the connector's offsets for a new snapshot",
                        cfg.slot, position.commit
                    ))
                    .with_class("DataLoss"));
                }
                if let Some(confirmed) = slot.confirmed_flush
                    && confirmed > position.commit
                {
                    return Err(ConnectError::fatal(format!(
                        "replication slot `{}` was advanced to LSN {confirmed}, past the last event in Kafka (LSN {}): the changes between were consumed by something else and are lost to this connector",
                        cfg.slot, position.commit
                    ))
                    .with_class("DataLoss"));
                }
                self.position = position;
                if cfg.snapshot == SnapshotMode::InitialOnly {
                    self.phase = Phase::Done;
                } else {
                    self.phase = Phase::Stream;
                }
                tracing::info!(slot = %cfg.slot, lsn = %position.commit, "resuming the change stream");
            }
            (_, done) => {
                if cfg.snapshot == SnapshotMode::NoData {
                    // Stream from wherever the slot is (created now if new).
                    if slot.is_none() {
                        self.open_stream(Some("nothing")).await?;
                        self.stream = None;
                    }
                    let conn = self.sql().await?;
                    let slot = catalog::slot_state(conn, &cfg.slot).await?;
                    self.position.commit = slot.and_then(|s| s.confirmed_flush).unwrap_or_default();
                    self.phase = Phase::Stream;
                    return Ok(());
                }
                if done == Some(false) {
                    tracing::warn!(slot = %cfg.slot, "the previous snapshot did not finish; it starts again from the beginning");
                }
                if slot.is_some() {
                    // Only a slot created now exports a snapshot consistent
                    // with its start; nothing after its position is in
                    // Kafka yet, so dropping it loses nothing.
                    tracing::info!(slot = %cfg.slot, "no completed snapshot is stored: the slot is created again for a consistent snapshot");
                    let conn = self.sql().await?;
                    catalog::drop_slot(conn, &cfg.slot, SLOT_RELEASE_WAIT).await?;
                }
                self.begin_snapshot(captured).await?;
            }
        }
        Ok(())
    }

    /// Connects for replication; creates the slot if it is missing (with
    /// `snapshot` as its EXPORT/NOEXPORT choice).
    async fn open_stream(&mut self, snapshot: Option<&str>) -> Result<(), ConnectError> {
        let config = ReplicationStreamConfig::builder(&self.cfg.slot, &self.cfg.publication)
            .with_protocol_version(1)
            .with_streaming_mode(StreamingMode::Off)
            .with_feedback_interval(Duration::from_millis(self.cfg.status_ms))
            .with_connection_timeout(Duration::from_millis(self.cfg.connect_timeout_ms))
            .with_retry_config(RetryConfig {
                max_attempts: 1,
                ..RetryConfig::default()
            })
            .with_slot_options(ReplicationSlotOptions {
                snapshot: snapshot.map(str::to_string),
                ..ReplicationSlotOptions::default()
            });
        let mut stream = LogicalReplicationStream::new(&self.cfg.conninfo(true), config)
            .await
            .map_err(|e| self.replication_error("connecting for replication", e))?;
        if snapshot.is_some() {
            stream
                .ensure_replication_slot()
                .await
                .map_err(|e| self.replication_error("creating the replication slot", e))?;
        }
        self.stream = Some(stream);
        Ok(())
    }

    fn replication_error(&self, what: &str, e: ReplicationError) -> ConnectError {
        let text = e.to_string();
        let lost = |why: &str| {
            ConnectError::fatal(format!(
                "{what}: {text}. {why}: the changes after LSN {} are lost; reset the connector's offsets for a new snapshot",
                self.position.commit
            ))
            .with_class("DataLoss")
        };
        if text.contains("has already been removed") {
            return lost("PostgreSQL recycled WAL the slot needed");
        }
        if text.contains("can no longer get changes") || text.contains("invalidated") {
            return lost("The replication slot was invalidated");
        }
        if text.contains("does not exist") && text.contains("slot") {
            return lost(&format!("Replication slot `{}` was dropped", self.cfg.slot));
        }
        match e {
            ReplicationError::Authentication(_) | ReplicationError::Config(_) => {
                ConnectError::fatal(format!("{what}: {text}")).with_class("ConfigException")
            }
            ReplicationError::PermanentConnection(_) if text.contains("permission") => {
                ConnectError::fatal(format!("{what}: {text}")).with_class("ConfigException")
            }
            _ => ConnectError::retriable(format!(
                "{what} at {}:{}: {text}",
                self.cfg.hostname, self.cfg.port
            ))
            .with_class("ReplicationConnectionLost"),
        }
    }

    async fn begin_snapshot(
        &mut self,
        captured: Vec<(u32, String, String)>,
    ) -> Result<(), ConnectError> {
        self.open_stream(Some("export")).await?;
        let name = self
            .stream
            .as_ref()
            .and_then(|s| s.exported_snapshot_name())
            .map(str::to_string)
            .ok_or_else(|| {
                ConnectError::retriable(
                    "the replication slot was created by someone else meanwhile; trying again",
                )
            })?;
        let mut conn = catalog::connect(&self.cfg).await?;
        sqlx::query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .execute(&mut conn)
            .await
            .map_err(|e| sql_error("starting the snapshot transaction", e))?;
        sqlx::query(&format!(
            "SET TRANSACTION SNAPSHOT '{}'",
            name.replace('\'', "")
        ))
        .execute(&mut conn)
        .await
        .map_err(|e| sql_error("importing the slot's snapshot", e))?;
        // The snapshot is imported: the replication connection is not
        // needed until streaming starts (and would time out idle in COPY).
        if let Some(mut s) = self.stream.take() {
            let _ = s.stop().await;
        }
        let slot_name = self.cfg.slot.clone();
        let sql = self.sql().await?;
        let consistent_point = catalog::slot_state(sql, &slot_name)
            .await?
            .and_then(|s| s.confirmed_flush)
            .unwrap_or_default();
        let mut tables = Vec::new();
        for (oid, _, _) in captured {
            if let Some(info) = catalog::table_info(&mut conn, oid).await? {
                let table = Arc::new(Table::new(info, &self.cfg));
                self.tables.insert(oid, Some(table.clone()));
                tables.push(table);
            }
        }
        tracing::info!(
            slot = %self.cfg.slot,
            lsn = %consistent_point,
            tables = tables.len(),
            "snapshot started"
        );
        self.position = Position {
            commit: consistent_point,
            proc: Lsn(0),
        };
        self.phase = Phase::Snapshot(Box::new(Snapshot {
            conn,
            tables,
            next_table: 0,
            cursor_open: false,
            consistent_point,
            ts_us: chrono::Utc::now().timestamp_micros(),
            emitted: 0,
            held: None,
        }));
        Ok(())
    }

    async fn poll_snapshot(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
        let Phase::Snapshot(snap) = &mut self.phase else {
            unreachable!("called in the snapshot phase")
        };
        let mut rows: Vec<(HeldRow, bool)> = Vec::new();
        let mut finished = false;
        while rows.len() < self.cfg.max_batch {
            let Some(table) = snap.tables.get(snap.next_table).cloned() else {
                finished = true;
                break;
            };
            if !snap.cursor_open {
                let columns = table
                    .info
                    .columns
                    .iter()
                    .map(|c| format!("{}::text", quote(&c.name)))
                    .collect::<Vec<_>>()
                    .join(", ");
                let select = format!(
                    "DECLARE sluice_snapshot NO SCROLL CURSOR FOR SELECT {} FROM ONLY {}",
                    if columns.is_empty() {
                        "1".into()
                    } else {
                        columns
                    },
                    catalog::qualified(&table.info.schema, &table.info.name)
                );
                sqlx::query(&select)
                    .execute(&mut snap.conn)
                    .await
                    .map_err(|e| {
                        sql_error(
                            &format!("reading {} for the snapshot", table.info.full_name()),
                            e,
                        )
                    })?;
                snap.cursor_open = true;
            }
            // Not a cached statement: the same FETCH reads every table, and
            // a cached one would keep the first table's row description.
            let fetched = sqlx::query(&format!(
                "FETCH {} FROM sluice_snapshot",
                self.cfg.snapshot_fetch.min(self.cfg.max_batch as u32)
            ))
            .persistent(false)
            .fetch_all(&mut snap.conn)
            .await
            .map_err(|e| {
                sql_error(
                    &format!("reading {} for the snapshot", table.info.full_name()),
                    e,
                )
            })?;
            if fetched.is_empty() {
                sqlx::query("CLOSE sluice_snapshot")
                    .execute(&mut snap.conn)
                    .await
                    .map_err(|e| sql_error("closing the snapshot cursor", e))?;
                snap.cursor_open = false;
                snap.next_table += 1;
                if let Some(held) = &mut snap.held {
                    held.last_in_table = true;
                }
                continue;
            }
            for r in fetched {
                let row: RowText = (0..table.info.columns.len())
                    .map(|i| {
                        Some(match r.get::<Option<String>, _>(i) {
                            Some(t) => ColumnText::Text(t),
                            None => ColumnText::Null,
                        })
                    })
                    .collect();
                let first_in_table = snap
                    .held
                    .as_ref()
                    .is_none_or(|h| h.last_in_table || !Arc::ptr_eq(&h.table, &table));
                let next = HeldRow {
                    table: table.clone(),
                    row,
                    first_in_table,
                    last_in_table: false,
                };
                if let Some(held) = snap.held.replace(next) {
                    rows.push((held, false));
                }
            }
        }
        if finished && let Some(held) = snap.held.take() {
            rows.push((held, true));
        }
        let consistent_point = snap.consistent_point;
        let ts_us = snap.ts_us;
        let mut emitted = snap.emitted;
        let mut out = Vec::with_capacity(rows.len());
        let now = chrono::Utc::now().timestamp_micros();
        let writer = self.writer();
        for (held, last) in rows {
            let marker = if emitted == 0 {
                "first"
            } else if last {
                "last"
            } else if held.first_in_table {
                "first_in_data_collection"
            } else if held.last_in_table {
                "last_in_data_collection"
            } else {
                "true"
            };
            emitted += 1;
            let offset = json!({
                "lsn": consistent_point.0,
                "lsn_commit": consistent_point.0,
                "ts_usec": ts_us,
                "snapshot": true,
                "last_snapshot_record": last,
            });
            let at = SourcePosition {
                ts_us,
                snapshot: marker,
                tx_id: None,
                lsn: Some(consistent_point.0),
                sequence: Some((None, consistent_point.0)),
            };
            out.extend(
                writer
                    .records(
                        &held.table,
                        Op::Read,
                        None,
                        Some(&held.row),
                        &at,
                        &offset,
                        now,
                    )
                    .map_err(bad_value)?,
            );
        }
        if let Phase::Snapshot(snap) = &mut self.phase {
            snap.emitted = emitted;
        }
        if finished {
            let Phase::Snapshot(snap) = std::mem::replace(&mut self.phase, Phase::Stream) else {
                unreachable!()
            };
            let mut conn = snap.conn;
            let _ = sqlx::query("COMMIT").execute(&mut conn).await;
            let _ = conn.close().await;
            tracing::info!(rows = snap.emitted, "snapshot finished");
            if self.cfg.snapshot == SnapshotMode::InitialOnly {
                self.phase = Phase::Done;
            }
            self.confirmable = Some(consistent_point);
        }
        Ok(out)
    }

    /// Measures the slot's lag once per `status.update.interval.ms`. A
    /// failure here is only logged: the stream itself says what is wrong.
    async fn measure_slot_lag(&mut self) {
        let every = Duration::from_millis(self.cfg.status_ms);
        if self.lag_measured.is_some_and(|at| at.elapsed() < every) {
            return;
        }
        self.lag_measured = Some(Instant::now());
        let slot = self.cfg.slot.clone();
        let measured = match self.sql().await {
            Ok(conn) => catalog::slot_lag_bytes(conn, &slot).await,
            Err(e) => Err(e),
        };
        match measured {
            Ok(lag) => self.slot_lag = lag,
            Err(e) => {
                // The connection may be the broken part: a new one next time.
                self.sql = None;
                tracing::warn!(slot = %slot, error = %e, "could not measure the replication slot's lag");
            }
        }
    }

    async fn poll_stream(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
        if self.stream.is_none() {
            self.connect_stream().await?;
        }
        let at_start = self.position;
        let result = self.read_changes().await;
        if result.is_err() {
            // Whatever this poll read is handed over by nobody: read it again
            // on a fresh connection, from the last position handed over.
            self.position = at_start;
            self.txn = None;
            if let Some(mut s) = self.stream.take() {
                let _ = s.stop().await;
            }
        }
        result
    }

    async fn connect_stream(&mut self) -> Result<(), ConnectError> {
        let cfg = self.cfg.clone();
        let conn = self.sql().await?;
        match catalog::slot_state(conn, &cfg.slot).await? {
            None => {
                return Err(ConnectError::fatal(format!(
                    "replication slot `{}` no longer exists: the changes after LSN {} are lost. Reset the connector's offsets for a new snapshot",
                    cfg.slot, self.position.commit
                ))
                .with_class("DataLoss"));
            }
            Some(s) if s.active_pid.is_some() => {
                return Err(ConnectError::retriable(format!(
                    "replication slot `{}` is in use by PostgreSQL process {}; waiting for it to be released",
                    cfg.slot,
                    s.active_pid.unwrap_or_default()
                ))
                .with_class("SlotInUse"));
            }
            Some(_) => {}
        }
        self.open_stream(None).await?;
        self.parser = LogicalReplicationParser::with_protocol_version(1);
        self.txn = None;
        let start = self.position.commit;
        let stream = self.stream.as_mut().expect("opened above");
        if let Err(e) = stream.start(Some(start.0)).await {
            self.stream = None;
            return Err(self.replication_error("starting replication", e));
        }
        tracing::info!(slot = %cfg.slot, lsn = %start, "streaming changes");
        Ok(())
    }

    async fn read_changes(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
        let mut out: Vec<SourceRecord> = Vec::new();
        let idle_until = Instant::now() + Duration::from_millis(self.cfg.poll_ms);
        let mut until = idle_until;
        let mut token = deadline_token(until);
        loop {
            if out.len() >= self.cfg.max_batch {
                break;
            }
            let stream = self.stream.as_mut().expect("connected");
            let raw = match stream.next_raw_event(&token.0).await {
                Ok(raw) => raw,
                Err(ReplicationError::Cancelled(_)) => {
                    // A transaction in progress is finished before the
                    // batch is handed over only if it is quick; otherwise
                    // the batch ends inside it, which positions allow.
                    break;
                }
                Err(e) => return Err(self.replication_error("reading the change stream", e)),
            };
            if raw.data.is_empty() {
                continue;
            }
            let message = self
                .parser
                .parse_wal_message_bytes(raw.data)
                .map_err(|e| self.replication_error("decoding pgoutput", e))?;
            let before = out.len();
            self.apply(message.message, Lsn(raw.wal_start.value()), &mut out)
                .await?;
            if before == 0 && !out.is_empty() {
                let linger = Instant::now() + LINGER;
                if linger < until {
                    until = linger;
                    token = deadline_token(until);
                }
            }
        }
        drop(token);
        if out.is_empty() && self.txn.is_none() {
            self.maybe_heartbeat(&mut out);
        }
        if let Some(stream) = self.stream.as_mut() {
            stream.maybe_send_feedback().await;
        }
        Ok(out)
    }

    fn maybe_heartbeat(&mut self, out: &mut Vec<SourceRecord>) {
        if self.cfg.heartbeat_ms == 0
            || self.last_heartbeat.elapsed() < Duration::from_millis(self.cfg.heartbeat_ms)
        {
            return;
        }
        self.last_heartbeat = Instant::now();
        let Some(stream) = self.stream.as_ref() else {
            return;
        };
        // Every transaction that committed before the server's position
        // was sent before its keepalive, and none is open here.
        let at = Lsn(stream.current_lsn()).max(self.position.commit);
        self.position = Position {
            commit: at,
            proc: Lsn(0),
        };
        self.confirmable = Some(at);
        let now = chrono::Utc::now();
        let offset = json!({
            "lsn": at.0,
            "lsn_commit": at.0,
            "ts_usec": now.timestamp_micros(),
        });
        out.push(heartbeat(
            &self.cfg,
            &offset,
            now.timestamp_millis(),
            self.context.key_schemas,
            self.context.value_schemas,
        ));
    }

    async fn apply(
        &mut self,
        message: LogicalReplicationMessage,
        lsn: Lsn,
        out: &mut Vec<SourceRecord>,
    ) -> Result<(), ConnectError> {
        match message {
            LogicalReplicationMessage::Begin {
                final_lsn,
                timestamp,
                xid,
            } => {
                self.txn = Some(Transaction {
                    xid,
                    commit: Lsn(final_lsn),
                    ts_us: timestamp + PG_EPOCH_US,
                });
            }
            LogicalReplicationMessage::Commit { end_lsn, .. } => {
                self.txn = None;
                self.last_commit_end = Some(Lsn(end_lsn));
            }
            LogicalReplicationMessage::Relation {
                relation_id,
                namespace,
                relation_name,
                columns,
                ..
            } => {
                let captured = self.cfg.tables.captures(&namespace, &relation_name);
                let table = if captured {
                    let wire: Vec<(String, u32, i32)> = columns
                        .iter()
                        .map(|c| (c.name.to_string(), c.type_id, c.type_modifier))
                        .collect();
                    let info = self
                        .relation_info(relation_id, &namespace, &relation_name, wire)
                        .await?;
                    tracing::info!(
                        table = %info.full_name(),
                        columns = info.columns.len(),
                        before = %info.before_image(),
                        "table shape received"
                    );
                    Some(Arc::new(Table::new(info, &self.cfg)))
                } else {
                    None
                };
                self.tables.insert(relation_id, table);
            }
            LogicalReplicationMessage::Insert { relation_id, tuple } => {
                if !self.cfg.operations.create {
                    return self.skip(lsn);
                }
                let Some(table) = self.table(relation_id)? else {
                    return Ok(());
                };
                let after = row_text(&tuple);
                self.emit(&table, Op::Create, None, Some(after), lsn, out)?;
            }
            LogicalReplicationMessage::Update {
                relation_id,
                old_tuple,
                new_tuple,
                ..
            } => {
                if !self.cfg.operations.update {
                    return self.skip(lsn);
                }
                let Some(table) = self.table(relation_id)? else {
                    return Ok(());
                };
                let before = old_tuple.as_ref().map(row_text);
                let mut after = row_text(&new_tuple);
                // An unchanged TOASTed value is not sent; with a full old
                // row it is known.
                if let Some(before) = &before {
                    for (i, v) in after.iter_mut().enumerate() {
                        if *v == Some(ColumnText::Unchanged)
                            && let Some(Some(ColumnText::Text(t))) = before.get(i)
                        {
                            *v = Some(ColumnText::Text(t.clone()));
                        }
                    }
                }
                // A changed key is, as Debezium writes it, the old key's
                // delete (and tombstone) and the new key's create: keyed
                // consumers and compacted topics see the old key go.
                let key_changed = before.as_ref().is_some_and(|before| {
                    table
                        .key_columns
                        .iter()
                        .any(|&i| before.get(i) != after.get(i))
                });
                if key_changed {
                    self.emit_all(
                        &table,
                        vec![(Op::Delete, before, None), (Op::Create, None, Some(after))],
                        lsn,
                        out,
                    )?;
                } else {
                    self.emit(&table, Op::Update, before, Some(after), lsn, out)?;
                }
            }
            LogicalReplicationMessage::Delete {
                relation_id,
                old_tuple,
                ..
            } => {
                if !self.cfg.operations.delete {
                    return self.skip(lsn);
                }
                let Some(table) = self.table(relation_id)? else {
                    return Ok(());
                };
                let before = row_text(&old_tuple);
                self.emit(&table, Op::Delete, Some(before), None, lsn, out)?;
            }
            LogicalReplicationMessage::Truncate { relation_ids, .. } => {
                if !self.cfg.operations.truncate {
                    return self.skip(lsn);
                }
                for relation_id in relation_ids {
                    if let Some(table) = self.table(relation_id)? {
                        self.emit(&table, Op::Truncate, None, None, lsn, out)?;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// A skipped operation still moves the position.
    fn skip(&mut self, lsn: Lsn) -> Result<(), ConnectError> {
        if let Some(txn) = &self.txn
            && !self.position.covers(txn.commit, lsn)
        {
            self.position = Position {
                commit: txn.commit,
                proc: lsn,
            };
        }
        Ok(())
    }

    fn table(&self, relation_id: u32) -> Result<Option<Arc<Table>>, ConnectError> {
        match self.tables.get(&relation_id) {
            Some(t) => Ok(t.clone()),
            None => Err(ConnectError::fatal(format!(
                "pgoutput sent a change of relation {relation_id} before describing it"
            ))
            .with_class("ProtocolError")),
        }
    }

    /// The table as pgoutput describes it now, with nullability and the
    /// primary key from the catalog (matched by column name: the catalog
    /// may already be ahead of the stream).
    async fn relation_info(
        &mut self,
        oid: u32,
        schema: &str,
        name: &str,
        wire: Vec<(String, u32, i32)>,
    ) -> Result<TableInfo, ConnectError> {
        let conn = self.sql().await?;
        let catalog = catalog::table_info(conn, oid).await?;
        let columns = wire
            .into_iter()
            .map(|(name, type_oid, typmod)| {
                let known = catalog
                    .as_ref()
                    .and_then(|c| c.columns.iter().find(|col| col.name == name));
                ColumnInfo {
                    ty: known
                        .filter(|k| k.type_oid == type_oid || type_oid >= 16384)
                        .map(|k| k.ty.clone())
                        .unwrap_or_else(|| crate::types::PgType::from_oid(type_oid, typmod)),
                    nullable: known.is_none_or(|k| k.nullable),
                    name,
                    type_oid,
                    type_modifier: typmod,
                }
            })
            .collect();
        let (primary_key, replica_identity) = catalog
            .map(|c| (c.primary_key, c.replica_identity))
            .unwrap_or_default();
        Ok(TableInfo {
            oid,
            schema: schema.to_string(),
            name: name.to_string(),
            columns,
            primary_key,
            replica_identity,
        })
    }

    fn emit(
        &mut self,
        table: &Table,
        op: Op,
        before: Option<RowText>,
        after: Option<RowText>,
        lsn: Lsn,
        out: &mut Vec<SourceRecord>,
    ) -> Result<(), ConnectError> {
        self.emit_all(table, vec![(op, before, after)], lsn, out)
    }

    /// The events of one change at `lsn` (two for a changed key), skipped
    /// together if the stored position already covers it.
    fn emit_all(
        &mut self,
        table: &Table,
        events: Vec<(Op, Option<RowText>, Option<RowText>)>,
        lsn: Lsn,
        out: &mut Vec<SourceRecord>,
    ) -> Result<(), ConnectError> {
        let Some(txn) = &self.txn else {
            return Err(
                ConnectError::fatal("pgoutput sent a change outside a transaction")
                    .with_class("ProtocolError"),
            );
        };
        if self.position.covers(txn.commit, lsn) {
            return Ok(());
        }
        let previous = self.last_commit_end.map(|l| l.0);
        let at = SourcePosition {
            ts_us: txn.ts_us,
            snapshot: "false",
            tx_id: Some(txn.xid as i64),
            lsn: Some(lsn.0),
            sequence: Some((previous, lsn.0)),
        };
        let now = chrono::Utc::now().timestamp_micros();
        for (op, before, after) in events {
            let offset = json!({
                "lsn": lsn.0,
                "lsn_proc": lsn.0,
                "lsn_commit": txn.commit.0,
                "txId": txn.xid,
                "ts_usec": txn.ts_us,
                "messageType": match op {
                    Op::Create => "INSERT",
                    Op::Update => "UPDATE",
                    Op::Delete => "DELETE",
                    Op::Truncate => "TRUNCATE",
                    Op::Read => "READ",
                },
            });
            let records = self
                .writer()
                .records(
                    table,
                    op,
                    before.as_ref(),
                    after.as_ref(),
                    &at,
                    &offset,
                    now,
                )
                .map_err(|e| bad_value(format!("{e} (at LSN {lsn})")))?;
            out.extend(records);
        }
        self.position = Position {
            commit: txn.commit,
            proc: lsn,
        };
        self.confirmable = Some(txn.commit);
        Ok(())
    }
}

/// A value that has no form in the event: the task fails rather than
/// drop a change, saying which value and what to set.
fn bad_value(message: String) -> ConnectError {
    ConnectError::fatal(format!("cannot write the change event: {message}"))
        .with_class("DataException")
}

fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

/// A token cancelled at `until`, and the timer that cancels it (aborted
/// when dropped).
struct DeadlineToken(CancellationToken, tokio::task::JoinHandle<()>);

impl Drop for DeadlineToken {
    fn drop(&mut self) {
        self.1.abort();
    }
}

fn deadline_token(until: Instant) -> DeadlineToken {
    let token = CancellationToken::new();
    let cancel = token.clone();
    let timer = tokio::spawn(async move {
        tokio::time::sleep_until(until.into()).await;
        cancel.cancel();
    });
    DeadlineToken(token, timer)
}

fn row_text(tuple: &pg_walstream::TupleData) -> RowText {
    (0..tuple.column_count())
        .map(|i| {
            tuple.get_column(i).map(|c| {
                if c.is_null() {
                    ColumnText::Null
                } else if c.is_unchanged() {
                    ColumnText::Unchanged
                } else {
                    ColumnText::Text(c.as_str().map(|s| s.into_owned()).unwrap_or_default())
                }
            })
        })
        .collect()
}

#[async_trait]
impl SourceTask for CdcTask {
    async fn poll(&mut self) -> Result<Option<Vec<SourceRecord>>, ConnectError> {
        if self.stopping {
            return Ok(None);
        }
        if matches!(self.phase, Phase::Start) {
            self.start().await?;
        }
        if matches!(self.phase, Phase::Snapshot(_) | Phase::Stream) {
            self.measure_slot_lag().await;
        }
        match self.phase {
            Phase::Start => unreachable!("started above"),
            Phase::Snapshot(_) => self.poll_snapshot().await.map(Some),
            Phase::Stream => self.poll_stream().await.map(Some),
            Phase::Done => Ok(None),
        }
    }

    fn gauges(&self) -> Vec<SourceGauge> {
        self.slot_lag
            .map(|lag| SourceGauge {
                name: "replication_slot_lag_bytes",
                help: "WAL a change data capture source's replication slot holds back (the server's position less the confirmed one), in bytes",
                value: lag,
            })
            .into_iter()
            .collect()
    }

    async fn commit(&mut self) -> Result<(), ConnectError> {
        // Everything polled so far is in Kafka: the slot may let go of it.
        if let (Some(lsn), Some(stream)) = (self.confirmable, self.stream.as_mut()) {
            stream.shared_lsn_feedback.update_applied_lsn(lsn.0);
            stream.maybe_send_feedback().await;
        } else if let Some(lsn) = self.confirmable
            && matches!(self.phase, Phase::Stream)
        {
            // Between the snapshot and the stream's first connection: the
            // stream starts from here anyway.
            let _ = lsn;
        }
        Ok(())
    }

    async fn stop(&mut self) {
        self.stopping = true;
        if let Some(mut stream) = self.stream.take() {
            // Only what `commit` confirmed: a batch polled since may never
            // reach Kafka (the task stops because its transaction failed),
            // and confirming it would free WAL that Kafka lacks.
            let _ = stream.send_feedback().await;
            let _ = stream.stop().await;
        }
        let slot = self.cfg.slot.clone();
        if self.cfg.slot_drop_on_stop
            && let Ok(conn) = self.sql().await
            && let Err(e) = catalog::drop_slot(conn, &slot, SLOT_RELEASE_WAIT).await
        {
            tracing::warn!(slot = %slot, error = %e, "could not drop the replication slot");
        }
        if let Some(conn) = self.sql.take() {
            let _ = conn.close().await;
        }
    }
}
