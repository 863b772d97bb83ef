//! A `jdbc-source` task: its tables (or query), each polled at its own
//! pace, the result read `batch.max.rows` at a time, each row a record
//! whose offset is Confluent's.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use sluice_sdk::{ConnectError, SourceOffsets, SourceRecord, SourceTask, TaskContext};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::columns::{self, ColumnFacts, RowShape};
use super::config::{Input, Mode, SourceConfig, mode_name};
use super::query::{self, Fetched, Position, Statement, TableId, quote};
use crate::db::Pool;

/// One table, or the query: what is read, where to, and how far.
struct Unit {
    /// For messages: the table's full name, or `query`.
    name: String,
    topic: String,
    partition: serde_json::Value,
    /// The value schema's name: the table's (none for a query).
    schema_name: Option<String>,
    statement: Statement,
    facts: HashMap<String, ColumnFacts>,
    incrementing: Option<String>,
    timestamps: Vec<String>,
    position: Position,
    next_run: Instant,
}

/// A query whose result is being read.
struct Reading {
    unit: usize,
    rows: mpsc::Receiver<Fetched>,
    shape: Option<Shaped>,
}

struct Shaped {
    row: RowShape,
    incrementing: Option<usize>,
    timestamps: Vec<usize>,
}

pub struct JdbcSourceTask {
    cfg: SourceConfig,
    context: TaskContext,
    stored: SourceOffsets,
    pool: Option<Pool>,
    units: Vec<Unit>,
    discovered: Option<Instant>,
    reading: Option<Reading>,
}

impl JdbcSourceTask {
    pub fn new(cfg: SourceConfig, context: TaskContext, stored: SourceOffsets) -> JdbcSourceTask {
        JdbcSourceTask {
            cfg,
            context,
            stored,
            pool: None,
            units: Vec::new(),
            discovered: None,
            reading: None,
        }
    }

    async fn pool(&mut self) -> Result<Pool, ConnectError> {
        if self.pool.is_none() {
            self.pool = Some(
                Pool::connect(
                    &self.cfg.connection_url,
                    self.cfg.user.as_deref(),
                    self.cfg.password.as_deref(),
                    2,
                    false,
                )
                .await?,
            );
        }
        Ok(self.pool.clone().expect("connected above"))
    }

    /// The stored offset of a partition, by Confluent's keys: protocol 1
    /// first, then the unqualified table name of protocol 0.
    fn stored_position(&self, partitions: &[serde_json::Value]) -> Option<Position> {
        partitions.iter().find_map(|p| {
            self.stored
                .get(&sluice_sdk::source_partition_key(p))
                .map(Position::from_offset)
        })
    }

    /// Where a unit starts when nothing is stored: `timestamp.initial`
    /// (`-1`: now), else the beginning.
    async fn initial_position(&mut self) -> Result<Position, ConnectError> {
        let timestamp = match self.cfg.timestamp_initial {
            Some(-1) => {
                let pool = self.pool().await?;
                Some(query::now(&pool).await?)
            }
            Some(ms) => chrono::DateTime::from_timestamp_millis(ms).map(|d| d.naive_utc()),
            None => None,
        };
        Ok(Position {
            incrementing: None,
            timestamp,
        })
    }

    /// Lists the tables (again after `table.poll.interval.ms`), keeping
    /// the position of those already known.
    async fn discover(&mut self) -> Result<(), ConnectError> {
        let due = self
            .discovered
            .is_none_or(|at| at.elapsed() >= Duration::from_millis(self.cfg.table_poll_ms));
        if !due {
            return Ok(());
        }
        let pool = self.pool().await?;
        let dialect = pool.dialect();
        let how = self.cfg.quote;
        let q = move |ident: &str| quote(dialect, how, ident);
        match self.cfg.input.clone() {
            Input::Query(sql) => {
                if self.units.is_empty() {
                    let partition = json!({"query": "query"});
                    let position = match self.stored_position(std::slice::from_ref(&partition)) {
                        Some(p) => p,
                        None => self.initial_position().await?,
                    };
                    let unit = Unit {
                        name: "query".into(),
                        topic: self.cfg.topic_prefix.clone(),
                        partition,
                        schema_name: None,
                        statement: Statement {
                            dialect,
                            mode: self.cfg.mode,
                            from: format!("SELECT * FROM ({sql}) sluice_query"),
                            incrementing: self.cfg.incrementing_column.as_deref().map(q),
                            timestamp: timestamp_expression(&self.cfg.timestamp_columns, &q),
                            suffix: self.cfg.query_suffix.clone(),
                        },
                        facts: HashMap::new(),
                        incrementing: self.cfg.incrementing_column.clone(),
                        timestamps: self.cfg.timestamp_columns.clone(),
                        position,
                        next_run: Instant::now(),
                    };
                    self.units.push(unit);
                }
            }
            Input::Tables(named) => {
                let all = query::tables(
                    &pool,
                    &self.cfg.table_types,
                    self.cfg.schema_pattern.as_deref(),
                )
                .await?;
                let missing: Vec<&String> = named
                    .iter()
                    .filter(|entry| !all.iter().any(|t| t.named_by(entry)))
                    .collect();
                if !missing.is_empty() {
                    return Err(ConnectError::fatal(format!(
                        "table.whitelist names {} that the database does not have (or this user cannot see): {}",
                        if missing.len() == 1 { "a table" } else { "tables" },
                        missing.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", ")
                    ))
                    .with_class("TableNotFound"));
                }
                let chosen: Vec<TableId> = all
                    .into_iter()
                    .filter(|t| named.is_empty() || named.iter().any(|e| t.named_by(e)))
                    .filter(|t| !self.cfg.exclude.iter().any(|e| t.named_by(e)))
                    .collect();
                let mut units = Vec::with_capacity(chosen.len());
                let mut known: HashMap<String, Unit> =
                    self.units.drain(..).map(|u| (u.name.clone(), u)).collect();
                for table in chosen {
                    match known.remove(&table.fqn()) {
                        Some(unit) => units.push(unit),
                        None => units.push(self.table_unit(&pool, table).await?),
                    }
                }
                if units.is_empty() {
                    tracing::warn!(
                        "no table to read: the database has none that table.whitelist, table.blacklist and table.types allow"
                    );
                }
                self.units = units;
            }
        }
        self.discovered = Some(Instant::now());
        Ok(())
    }

    async fn table_unit(&mut self, pool: &Pool, table: TableId) -> Result<Unit, ConnectError> {
        let dialect = pool.dialect();
        let cfg = self.cfg.clone();
        let q = |ident: &str| quote(dialect, cfg.quote, ident);
        let fqn = table.fqn();
        let facts: HashMap<String, ColumnFacts> = query::column_facts(pool, &table)
            .await?
            .into_iter()
            .collect();
        let incrementing = if cfg.mode.uses_incrementing() {
            Some(match &cfg.incrementing_column {
                Some(c) => c.clone(),
                None => {
                    let generated: Vec<&String> = facts
                        .iter()
                        .filter(|(_, f)| f.generated)
                        .map(|(n, _)| n)
                        .collect();
                    match generated.as_slice() {
                        [one] => (*one).clone(),
                        _ => {
                            return Err(ConnectError::fatal(format!(
                                "table `{fqn}` has {} auto-incremented columns, so mode={} cannot pick one: set incrementing.column.name",
                                generated.len(),
                                mode_name(cfg.mode)
                            ))
                            .with_class("InvalidConfig"));
                        }
                    }
                }
            })
        } else {
            None
        };
        let timestamps = if cfg.mode.uses_timestamp() {
            cfg.timestamp_columns.clone()
        } else {
            Vec::new()
        };
        for column in incrementing.iter().chain(&timestamps) {
            if !facts.contains_key(column) {
                return Err(ConnectError::fatal(format!(
                    "table `{fqn}` has no column `{column}` (named by incrementing.column.name or timestamp.column.name)"
                ))
                .with_class("InvalidConfig"));
            }
        }
        if cfg.validate_non_null {
            if let Some(column) = incrementing.as_ref().filter(|c| facts[*c].nullable) {
                return Err(ConnectError::fatal(format!(
                    "column `{column}` of `{fqn}` is nullable: a row whose incrementing column is null is never read. Make it NOT NULL, or set validate.non.null=false"
                ))
                .with_class("InvalidConfig"));
            }
            if !timestamps.is_empty() && timestamps.iter().all(|c| facts[c].nullable) {
                return Err(ConnectError::fatal(format!(
                    "timestamp column{} {} of `{fqn}` {} nullable: a row with no timestamp is never read. Make one NOT NULL, or set validate.non.null=false",
                    if timestamps.len() == 1 { "" } else { "s" },
                    timestamps.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", "),
                    if timestamps.len() == 1 { "is" } else { "are all" },
                ))
                .with_class("InvalidConfig"));
            }
        }
        let from = format!(
            "SELECT * FROM {}",
            [&table.schema, &Some(table.table.clone())]
                .into_iter()
                .flatten()
                .map(|p| q(p))
                .collect::<Vec<_>>()
                .join(".")
        );
        let statement = Statement {
            dialect,
            mode: cfg.mode,
            from,
            incrementing: incrementing.as_deref().map(q),
            timestamp: timestamp_expression(&timestamps, &q),
            suffix: cfg.query_suffix.clone(),
        };
        let partition = json!({"protocol": "1", "table": fqn});
        let legacy = json!({"table": table.table});
        let position = match self.stored_position(&[partition.clone(), legacy]) {
            Some(p) => p,
            None => self.initial_position().await?,
        };
        tracing::info!(table = %fqn, mode = mode_name(self.cfg.mode), position = %position.to_offset(), "reading table");
        Ok(Unit {
            name: fqn,
            topic: format!("{}{}", self.cfg.topic_prefix, table.table),
            partition,
            schema_name: Some(table.table.clone()),
            statement,
            facts,
            incrementing,
            timestamps,
            position,
            next_run: Instant::now(),
        })
    }

    /// Starts the query of the unit due first, after waiting for it.
    async fn start_reading(&mut self) -> Result<bool, ConnectError> {
        let Some((index, due)) = self
            .units
            .iter()
            .enumerate()
            .map(|(i, u)| (i, u.next_run))
            .min_by_key(|(_, at)| *at)
        else {
            // No table yet: look again later.
            tokio::time::sleep(Duration::from_millis(self.cfg.poll_ms)).await;
            return Ok(false);
        };
        if due > Instant::now() {
            tokio::time::sleep_until(due).await;
        }
        let pool = self.pool().await?;
        let unit = &self.units[index];
        let until = if unit.statement.mode.uses_timestamp() {
            let now = query::now(&pool).await?;
            Some(now - chrono::Duration::milliseconds(self.cfg.timestamp_delay_ms as i64))
        } else {
            None
        };
        let sql = unit.statement.sql(unit.position, until);
        tracing::debug!(table = %unit.name, sql = %sql, "polling");
        self.reading = Some(Reading {
            unit: index,
            rows: query::spawn_reader(&pool, sql, self.cfg.batch_max_rows),
            shape: None,
        });
        Ok(true)
    }

    /// Up to `batch.max.rows` records of the result being read.
    async fn read_batch(&mut self) -> Result<Vec<SourceRecord>, ConnectError> {
        let reading = self.reading.as_mut().expect("reading");
        let unit = &self.units[reading.unit];
        let mut position = unit.position;
        let mut out = Vec::new();
        let mut finished = false;
        while out.len() < self.cfg.batch_max_rows {
            let Some(fetched) = reading.rows.recv().await else {
                finished = true;
                break;
            };
            let row = match fetched {
                Fetched::Columns(columns) => {
                    let row = RowShape::new(
                        unit.statement.dialect,
                        unit.schema_name.as_deref(),
                        &columns,
                        &|name| unit.facts.get(name).cloned(),
                        self.cfg.numeric_mapping,
                    );
                    let index = |name: &str| {
                        columns.iter().position(|(c, _)| c == name).or_else(|| {
                            columns
                                .iter()
                                .position(|(c, _)| c.eq_ignore_ascii_case(name))
                        })
                    };
                    let find = |name: &str| {
                        index(name).ok_or_else(|| {
                            ConnectError::fatal(format!(
                                "the result of `{}` has no column `{name}`",
                                unit.name
                            ))
                            .with_class("InvalidConfig")
                        })
                    };
                    let incrementing = unit.incrementing.as_deref().map(find).transpose()?;
                    let timestamps = unit
                        .timestamps
                        .iter()
                        .map(|c| find(c))
                        .collect::<Result<_, _>>()?;
                    reading.shape = Some(Shaped {
                        row,
                        incrementing,
                        timestamps,
                    });
                    continue;
                }
                Fetched::Row(row) => row,
                Fetched::Failed(e) => {
                    self.reading = None;
                    return Err(e);
                }
            };
            let shape = reading.shape.as_ref().expect("columns come first");
            let bad_row = |e: String| {
                ConnectError::fatal(format!("a row of `{}` cannot be read: {e}", unit.name))
                    .with_class("InvalidValue")
            };
            let payload = shape.row.payload(&row).map_err(bad_row)?;
            if let Some(i) = shape.incrementing {
                position.incrementing = Some(columns::integer(&row[i]).map_err(|e| {
                    bad_row(format!("incrementing column `{}`: {e}", shape.row.names[i]))
                })?);
            }
            if let Some(cell) = shape
                .timestamps
                .iter()
                .map(|i| &row[*i])
                .find(|c| !matches!(c, columns::Cell::Null))
            {
                position.timestamp = Some(columns::parse_timestamp(cell).map_err(bad_row)?);
            }
            let offset = match unit.statement.mode {
                Mode::Bulk => serde_json::Value::Null,
                _ => position.to_offset(),
            };
            out.push(SourceRecord {
                source_partition: unit.partition.clone(),
                source_offset: offset,
                topic: unit.topic.clone(),
                key: None,
                value: Some(payload.into_bytes()),
                headers: Vec::new(),
                timestamp: None,
                key_schema: None,
                value_schema: self.context.value_schemas.then(|| shape.row.schema.clone()),
            });
        }
        let index = reading.unit;
        let unit = &mut self.units[index];
        unit.position = position;
        if finished {
            unit.next_run = Instant::now() + Duration::from_millis(self.cfg.poll_ms);
            self.reading = None;
        }
        Ok(out)
    }
}

fn timestamp_expression(columns: &[String], q: &dyn Fn(&str) -> String) -> Option<String> {
    match columns {
        [] => None,
        [one] => Some(q(one)),
        many => Some(format!(
            "COALESCE({})",
            many.iter().map(|c| q(c)).collect::<Vec<_>>().join(", ")
        )),
    }
}

#[async_trait]
impl SourceTask for JdbcSourceTask {
    async fn poll(&mut self) -> Result<Option<Vec<SourceRecord>>, ConnectError> {
        if self.reading.is_none() {
            self.discover().await?;
            if !self.start_reading().await? {
                return Ok(Some(Vec::new()));
            }
        }
        self.read_batch().await.map(Some)
    }

    async fn stop(&mut self) {
        self.reading = None;
        if let Some(pool) = self.pool.take() {
            pool.close().await;
        }
    }
}
